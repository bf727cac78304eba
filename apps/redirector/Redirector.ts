import { Cause, Config, Context, Effect, Layer, Metric, Option, Runtime } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import {
  type HttpEngine,
  type HttpExchange,
  type HttpHandler,
  StatusWithHeaders,
  serveHttp
} from "../../infra/http/HttpServer.js"
import { METRICS_PATH, makeMetricsAnswer } from "../../infra/http/MetricsAnswer.js"
import { peerAddressReading } from "../../infra/http/PeerAddress.js"
import { NO_TRUSTED_PROXIES, visitorAddressOf } from "../../infra/http/TrustedProxies.js"
import {
  clicksCaptured,
  clicksDropped,
  clicksPublished,
  clicksSpooled,
  redirectorResponses
} from "../../infra/Metrics.js"
import { counterSource } from "../../infra/Prometheus.js"
import { naming } from "../../infra/StartupError.js"
import type { ClickBuffer } from "./ClickRound.js"
import { openClickSpool } from "./ClickSpool.js"
import { makeClickCapture } from "./Clicks.js"
import { answerTlsAsk, type HostRouting, makeHostRouting, TLS_ASK_PATH, VerifiedHosts } from "./HostTable.js"
import { SlugTable, startSlugTable } from "./SlugTable.js"
import { makeVisitorSecrets } from "./VisitorSecrets.js"

const NO_STORE = "private, no-store"
/** A redirect's status with its Cache-Control: one call on the request path (infra/http/Exchange.ts). */
const FOUND = new StatusWithHeaders(302, [["Cache-Control", NO_STORE]])
const HTML = "text/html; charset=utf-8"
const TEXT = "text/plain; charset=utf-8"

export const NOT_FOUND_PAGE =
  '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Link not found</title></head>' +
  "<body><h1>Link not found</h1><p>This short link does not exist or is no longer active.</p></body></html>\n"

const notFound = (ex: HttpExchange) =>
  ex
    .writeStatus(404)
    .writeHeader("Content-Type", HTML)
    .writeHeader("Cache-Control", NO_STORE)
    .writeHeader("X-Content-Type-Options", "nosniff")
    .end(NOT_FOUND_PAGE)

/**
 * The short host's answers by status class, counted with plain numbers on the request path
 * (no Effect there) and brought into the metrics registry when `/metrics` is rendered.
 * Health, metrics and TLS-ask requests are not counted.
 */
export class RedirectCounts {
  /** 302s. */
  redirects = 0
  /** 404s (unknown, disabled, expired, another host's) and 405s. */
  refused = 0
  /** 503s while the slug table loads. */
  unavailable = 0
}

/**
 * Everything that is not a redirect. /healthz, /readyz and /metrics are reserved slugs
 * (domain/Link.ts), so no link can shadow them and they are looked at only after a miss.
 */
const otherwise = (
  ex: HttpExchange,
  table: SlugTable,
  routing: HostRouting | undefined,
  counts: RedirectCounts,
  metrics: HttpHandler
) => {
  if (ex.path === METRICS_PATH) {
    metrics(ex)
  } else if (ex.method !== "GET" && ex.method !== "HEAD") {
    counts.refused++
    ex.writeStatus(405).writeHeader("Allow", "GET, HEAD").writeHeader("Content-Type", TEXT).end("Method Not Allowed\n")
  } else if (ex.path === "/healthz") {
    ex.writeStatus(200).writeHeader("Content-Type", TEXT).writeHeader("Cache-Control", "no-store").end("ok\n")
  } else if (ex.path === "/readyz") {
    if (table.ready)
      ex.writeStatus(200).writeHeader("Content-Type", TEXT).writeHeader("Cache-Control", "no-store").end("ready\n")
    else ex.writeStatus(503).writeHeader("Content-Type", TEXT).writeHeader("Retry-After", "1").end("loading links\n")
  } else if (ex.path === TLS_ASK_PATH && routing !== undefined) {
    answerTlsAsk(ex, routing.hosts)
  } else if (!table.ready) {
    counts.unavailable++
    ex.writeStatus(503)
      .writeHeader("Content-Type", TEXT)
      .writeHeader("Retry-After", "1")
      .writeHeader("Cache-Control", NO_STORE)
      .end("Starting up, try again in a moment.\n")
  } else {
    counts.refused++
    notFound(ex)
  }
}

/**
 * The request path: one slug-table lookup (the link's record), a few header writes,
 * one counter and, for a GET, one push into the click buffer. No database, no Effect, no parsing.
 */
export const makeRedirectHandler = (
  table: SlugTable,
  clicks: ClickBuffer | undefined,
  countryHeader: string,
  routing: HostRouting | undefined,
  counts: RedirectCounts,
  metrics: HttpHandler,
  // TRUSTED_PROXIES (infra/http/TrustedProxies.ts): with none, the socket peer as it comes.
  visitorAddress = visitorAddressOf(NO_TRUSTED_PROXIES)
): HttpHandler => {
  return (ex) => {
    // Custom domains (HostTable.ts): the canonical host passes after one header comparison.
    if (routing?.divert(ex)) {
      counts.refused++
      return
    }
    const row = table.rowOf(ex.path)
    if (row >= 0) {
      const method = ex.method
      if (method === "GET" || method === "HEAD") {
        const now = Date.now()
        if (now <= table.expiresAt(row)) {
          if (clicks !== undefined && method === "GET") {
            clicks.record(
              table,
              row,
              now,
              visitorAddress(ex),
              ex.header("user-agent"),
              ex.header("referer"),
              countryHeader === "" ? "" : ex.header(countryHeader)
            )
          }
          ex.writeStatus(FOUND).writeHeader("Location", table.location(row)).end("")
          counts.redirects++
          return
        }
        counts.refused++
        return notFound(ex)
      }
    }
    otherwise(ex, table, routing, counts, metrics)
  }
}

/** CLICK_CAPTURE: `on` (default) or `off` (for the benchmark's comparison). */
export const clickCaptureConfig = Config.string("CLICK_CAPTURE").pipe(
  Config.validate({ message: "must be on or off", validation: (s) => ["on", "off"].includes(s.trim().toLowerCase()) }),
  Config.map((s) => s.trim().toLowerCase() === "on"),
  Config.withDefault(true)
)

/**
 * REDIRECTOR_REUSE_PORT: `1` (or true/on) lets several redirector processes share SHORT_PORT,
 * one per core; off by default, so a second listener on a used port fails at start.
 */
export const reusePortConfig = Config.boolean("REDIRECTOR_REUSE_PORT").pipe(Config.withDefault(false))

export interface RedirectorShape {
  readonly engine: HttpEngine
  readonly port: number
  readonly table: SlugTable
  /** Undefined when CLICK_CAPTURE=off. */
  readonly clicks: ClickBuffer | undefined
}

const make = Effect.gen(function* () {
  const config = yield* AppConfig
  const capture = yield* clickCaptureConfig
  const reusePort = yield* reusePortConfig
  const table = new SlugTable()
  // The verified custom hosts, when the composition root provides them (Live.ts does).
  const hosts = yield* Effect.serviceOption(VerifiedHosts)
  const routing = Option.isSome(hosts)
    ? makeHostRouting(hosts.value, table, config.shortBase, NOT_FOUND_PAGE)
    : undefined
  // Acquired before the server, so released after it: the last clicks are published once
  // nothing can add more.
  const spool = capture ? yield* openClickSpool : undefined
  const clicks = capture ? yield* makeClickCapture(yield* makeVisitorSecrets, { spool }) : undefined
  if (clicks !== undefined) {
    // Plain numbers on the request path and the flusher; /metrics reads them (infra/Prometheus.ts).
    yield* counterSource(clicksCaptured, () => clicks.captured)
    yield* counterSource(clicksDropped, () => clicks.dropped)
    yield* counterSource(clicksPublished, () => clicks.published)
    if (spool !== undefined) yield* counterSource(clicksSpooled, () => spool.spooled)
  }
  const runtime = yield* Effect.runtime<never>()
  const counts = new RedirectCounts()
  yield* counterSource(Metric.tagged(redirectorResponses, "class", "3xx"), () => counts.redirects)
  yield* counterSource(Metric.tagged(redirectorResponses, "class", "4xx"), () => counts.refused)
  yield* counterSource(Metric.tagged(redirectorResponses, "class", "5xx"), () => counts.unavailable)
  const server = yield* serveHttp({
    host: "0.0.0.0",
    port: config.shortPort,
    reusePort,
    handler: makeRedirectHandler(
      table,
      clicks,
      config.countryHeader,
      routing,
      counts,
      makeMetricsAnswer(runtime),
      visitorAddressOf(config.trustedProxies)
    ),
    onError: (error) => Runtime.runFork(runtime)(Effect.logError("redirect handler failed", Cause.die(error)))
  }).pipe(naming("SHORT_PORT", config.shortPort))
  if (server.fallbackReason !== undefined) {
    yield* Effect.logWarning(`redirector falls back to node:http: ${server.fallbackReason}`)
  }
  yield* Effect.logInfo(
    `redirector listening on 0.0.0.0:${server.port} (${server.engine}${reusePort ? ", port shared" : ""}), ` +
      `click capture ${capture ? "on" : "off"}` +
      (capture && server.engine === "uWebSockets.js" ? `, peer addresses ${peerAddressReading()}` : "")
  )
  yield* Effect.addFinalizer(() => Effect.logInfo("redirector stopping: closing the listener, then flushing clicks"))
  yield* startSlugTable(table)
  return { engine: server.engine, port: server.port, table, clicks } satisfies RedirectorShape
})

export class Redirector extends Context.Tag("Redirector")<Redirector, RedirectorShape>() {}

/**
 * The short host: serves {short_base}/{slug} on SHORT_PORT (0.0.0.0) from the in-memory slug
 * table, which it loads at start and keeps following; closing stops the listener, then
 * publishes the clicks still buffered. Needs AppConfig, LinkRepo, VisitorSecretRepo and EventLog;
 * with VerifiedHosts (HostTable.ts) in its context it also serves verified custom domains.
 */
export const RedirectorLive = Layer.scopedDiscard(make)

/** RedirectorLive, also handing out what it runs (port, engine, table): for tests and banners. */
export const RedirectorLayer = Layer.scoped(Redirector, make)
