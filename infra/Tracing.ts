import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import { FetchHttpClient, Headers, HttpTraceContext } from "@effect/platform"
import { Config, type ConfigError, type Context, Effect, type Exit, FiberRef, Layer, Option, Tracer } from "effect"
import { globalValue } from "effect/GlobalValue"

/**
 * OTEL_EXPORTER_OTLP_ENDPOINT: the OTLP/HTTP base URL (spans go to `<base>/v1/traces` as
 * JSON); unset or empty: no tracing. OTEL_SERVICE_NAME: the `service.name` of the spans.
 */
export const tracingConfig = (defaultServiceName: string) =>
  Config.all({
    endpoint: Config.string("OTEL_EXPORTER_OTLP_ENDPOINT").pipe(
      Config.validate({
        message: "must be an absolute http(s) URL (the OTLP/HTTP base, e.g. http://collector:4318)",
        validation: (s) => s.trim() === "" || (URL.canParse(s) && /^https?:$/.test(new URL(s).protocol))
      }),
      Config.map((s) => s.trim().replace(/\/+$/, "")),
      Config.option,
      Config.map(Option.filter((s) => s !== ""))
    ),
    serviceName: Config.string("OTEL_SERVICE_NAME").pipe(
      Config.validate({ message: "must not be empty", validation: (s) => s.trim() !== "" }),
      Config.withDefault(defaultServiceName)
    )
  })

/** On in the fibers of an app whose spans are exported (see TracingLive). */
const tracingOn = globalValue(Symbol.for("shortlinks/Tracing/on"), () => FiberRef.unsafeMake(false))

/**
 * A span that is not exported, nor are its children: a root that starts neither a request
 * nor a job (polls, sweeps, their queries), or a child of an unsampled remote parent.
 */
class UnsampledSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = false
  readonly traceId: string
  readonly spanId = "0000000000000000"
  status: Tracer.SpanStatus
  readonly attributes = new Map<string, unknown>()
  readonly links: Array<Tracer.SpanLink> = []
  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind
  ) {
    this.traceId = Option.isSome(parent) ? parent.value.traceId : "00000000000000000000000000000000"
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  attribute() {}
  event() {}
  addLinks() {}
}

/**
 * Which spans are exported: a trace starts only at a request (kind `server`), a job (kind
 * `consumer`) or a batch of the outbox relay (kind `producer`), and goes on through the children of sampled spans. Everything else
 * (the polls and sweeps of the workers, their queries) costs an unsampled span only.
 */
const startsTrace = (parent: Option.Option<Tracer.AnySpan>, kind: Tracer.SpanKind) =>
  Option.isSome(parent) ? parent.value.sampled : kind === "server" || kind === "consumer" || kind === "producer"

const exportingTracer = (serviceName: string, url: string) =>
  Effect.map(OtlpTracer.make({ url, resource: { serviceName } }), (otlp) =>
    Tracer.make({
      span: (name, parent, context, links, startTime, kind) =>
        startsTrace(parent, kind)
          ? otlp.span(name, parent, context, links, startTime, kind)
          : new UnsampledSpan(name, parent, context, startTime, kind),
      context: otlp.context
    })
  )

/**
 * The app's tracer when OTEL_EXPORTER_OTLP_ENDPOINT is set: spans exported as OTLP/HTTP JSON
 * every 5 s and at shutdown (the exporter's scope is this layer's: provide it outermost, so
 * it closes after the app and flushes its last spans). Unset: no layer at all, nothing
 * exported. A bad value stops start-up with one line naming the variable.
 */
export const TracingLive = (defaultServiceName: string): Layer.Layer<never, ConfigError.ConfigError> =>
  Layer.unwrapEffect(
    Effect.map(tracingConfig(defaultServiceName), ({ endpoint, serviceName }) =>
      Option.match(endpoint, {
        onNone: () => Layer.empty,
        onSome: (base) =>
          Layer.mergeAll(
            Layer.unwrapScoped(Effect.map(exportingTracer(serviceName, `${base}/v1/traces`), Layer.setTracer)),
            Layer.locallyScoped(tracingOn, true)
          ).pipe(Layer.provide(OtlpSerialization.layerJson), Layer.provide(FetchHttpClient.layer))
      })
    )
  )

/**
 * The W3C `traceparent` of the current span, for work picked up later (an image's
 * conversion and rating): only while tracing is on and the span is sampled; none otherwise.
 */
export const currentTraceparent: Effect.Effect<string | null> = Effect.flatMap(FiberRef.get(tracingOn), (on) =>
  on
    ? Effect.map(Effect.option(Effect.currentSpan), (span) =>
        Option.isSome(span) && span.value.sampled ? HttpTraceContext.toHeaders(span.value).traceparent! : null
      )
    : Effect.succeed(null)
)

/** Whether this app exports spans (TracingLive with an endpoint). */
export const isTracing: Effect.Effect<boolean> = FiberRef.get(tracingOn)

/**
 * Runs a job as a span of kind `consumer`: the child of the stored `traceparent` (the
 * request that queued the job) when there is one, a trace of its own otherwise.
 */
export const withJobSpan =
  (name: string, traceparent: string | null, attributes: Record<string, unknown>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
    const parent = traceparent === null ? Option.none() : HttpTraceContext.w3c(Headers.fromInput({ traceparent }))
    return Effect.withSpan(
      effect,
      name,
      Option.isSome(parent)
        ? { kind: "consumer", parent: parent.value, attributes }
        : { kind: "consumer", root: true, attributes }
    )
  }
