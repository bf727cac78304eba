import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { currentTraceparent, TracingLive, withJobSpan } from "../../infra/Tracing.js"
import { OtlpReceiver, SpanKind } from "../support/otlpReceiver.js"

/**
 * The tracer of every app (infra/Tracing.ts) against a local OTLP/HTTP receiver: what is
 * exported, when, and nothing at all without OTEL_EXPORTER_OTLP_ENDPOINT.
 */
let receiver: OtlpReceiver
beforeAll(async () => {
  receiver = await OtlpReceiver.start()
})
afterAll(() => receiver.close())

const withEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromJson(env))

/** A request that queues a job, the job run later from the stored traceparent, and a poll. */
const work = Effect.gen(function* () {
  const traceparent = yield* Effect.gen(function* () {
    yield* Effect.withSpan(Effect.void, "sql.execute", { kind: "client" })
    return yield* Effect.withSpan(currentTraceparent, "Images.upload")
  }).pipe(Effect.withSpan("http.server POST", { kind: "server" }))
  yield* Effect.withSpan(Effect.void, "Codec.convert").pipe(
    withJobSpan("ImageConverter.convert", traceparent, { "image.id": "abc" })
  )
  // A poll of a worker: a root that is neither a request nor a job.
  yield* Effect.withSpan(Effect.withSpan(Effect.void, "sql.execute", { kind: "client" }), "Relay.poll")
  return traceparent
})

describe("traces (OTEL_EXPORTER_OTLP_ENDPOINT)", { timeout: 60_000 }, () => {
  it("unset: no exporter, nothing sent, and no traceparent stored with a job", async () => {
    const before = receiver.requests
    const traceparent = await Effect.runPromise(
      Effect.provide(work, TracingLive("shortlinks-test")).pipe(withEnv({ OTEL_SERVICE_NAME: "ignored" }))
    )
    expect(traceparent).toBeNull()
    expect(receiver.requests).toBe(before)
    // No layer at all: the tracer is Effect's own, as without TracingLive.
    const native = await Effect.runPromise(Effect.tracer)
    const inside = await Effect.runPromise(
      Effect.provide(Effect.tracer, TracingLive("shortlinks-test")).pipe(withEnv({}))
    )
    expect(inside).toBe(native)
  })

  it("a collector that does not answer costs the spans, never the app: it runs and stops", async () => {
    const closed = await OtlpReceiver.start()
    await closed.close()
    const traceparent = await Effect.runPromise(
      Effect.provide(work, TracingLive("shortlinks-test")).pipe(withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: closed.url }))
    )
    expect(traceparent).toMatch(/^00-/)
  })

  it("set: a request and the job it queued are one trace, flushed when the app stops; polls are not exported", async () => {
    const traceparent = await Effect.runPromise(
      Effect.provide(work, TracingLive("shortlinks-test")).pipe(
        withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/` })
      )
    )
    // The export interval is 5 s: these arrived through the flush when the layer closed.
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
    const names = receiver.spans.map((s) => s.name).sort()
    expect(names).toEqual([
      "Codec.convert",
      "ImageConverter.convert",
      "Images.upload",
      "http.server POST",
      "sql.execute"
    ])
    const [, traceId, parentId] = traceparent!.split("-")
    expect(new Set(receiver.spans.map((s) => s.traceId))).toEqual(new Set([traceId]))
    const byName = new Map(receiver.spans.map((s) => [s.name, s]))
    expect(byName.get("Images.upload")!.spanId).toBe(parentId)
    expect(byName.get("ImageConverter.convert")!.parentSpanId).toBe(parentId)
    expect(byName.get("ImageConverter.convert")!.kind).toBe(SpanKind.consumer)
    expect(byName.get("ImageConverter.convert")!.attributes["image.id"]).toBe("abc")
    expect(byName.get("http.server POST")!.kind).toBe(SpanKind.server)
    expect(new Set(receiver.spans.map((s) => s.serviceName))).toEqual(new Set(["shortlinks-test"]))
  })

  it("OTEL_SERVICE_NAME names the service", async () => {
    receiver.spans.length = 0
    await Effect.runPromise(
      Effect.provide(Effect.withSpan(Effect.void, "GET", { kind: "server" }), TracingLive("shortlinks-test")).pipe(
        withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "edge-api" })
      )
    )
    expect(receiver.spans.map((s) => s.serviceName)).toEqual(["edge-api"])
  })

  it("a bad endpoint stops start-up with a configuration error naming the variable", async () => {
    const exit = await Effect.runPromiseExit(
      Layer.launch(TracingLive("shortlinks-test")).pipe(withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }))
    )
    expect(Exit.isFailure(exit)).toBe(true)
    expect(String(exit)).toContain("OTEL_EXPORTER_OTLP_ENDPOINT")
    expect(String(exit)).toContain("must be an absolute http(s) URL")
  })
})
