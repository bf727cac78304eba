import { Cause, Context, Effect, Layer, Option, Runtime } from "effect"
import { isImageId } from "../../domain/Image.js"
import { AbuseReportRepo } from "../../domain/ports/AbuseReportRepo.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { DatabaseHealth } from "../../domain/ports/Database.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { type HttpEngine, type HttpHandler, serveHttp } from "../../infra/http/HttpServer.js"
import { makeMetricsAnswer, withMetricsPath } from "../../infra/http/MetricsAnswer.js"
import { naming } from "../../infra/StartupError.js"
import { cors, html, makeLater, methodNotAllowed, TEXT, unavailable } from "./MediaAnswers.js"
import { type MediaDeps, mediaCacheBytesConfig, mediaReportsPerMinuteConfig } from "./MediaConfig.js"
import { makeDelivery } from "./MediaDelivery.js"
import { makeSharePages } from "./MediaReports.js"
import { messagePage } from "./SharePage.js"

const DELIVERY = /^\/([A-Za-z0-9_-]{7,64})\.([A-Za-z0-9]{1,8})$/
const SHARE = /^\/v\/([^/]+)(\/report)?$/

const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~, -]{0,1000}$/

/**
 * The image host: `/{id}.{ext}` (bytes with the current rating), `/v/{id}` (share page),
 * `/v/{id}/report` (abuse reports), `/healthz`, `/readyz` (and `/metrics`, Media.ts's `withMetricsPath`). Every image answer looks the
 * image up in PostgreSQL first, so a rating change shows on the very next request; only the
 * immutable bytes are cached.
 */
export const makeMediaHandler = (deps: MediaDeps): HttpHandler => {
  const later = makeLater(deps)
  const deliver = makeDelivery(deps, later)
  const { share, report } = makeSharePages(deps, later)

  return (ex) => {
    const path = ex.path
    const method = ex.method
    const delivery = DELIVERY.exec(path)
    if (delivery !== null) {
      if (method === "GET" || method === "HEAD") return deliver(ex, delivery[1]!, delivery[2]!)
      if (method === "OPTIONS") {
        const requested = ex.header("access-control-request-headers")
        return cors(ex.writeStatus(204))
          .writeHeader("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
          .writeHeader(
            "Access-Control-Allow-Headers",
            requested !== "" && HEADER_LIST.test(requested) ? requested : "If-None-Match"
          )
          .writeHeader("Access-Control-Max-Age", "86400")
          .writeHeader("Cache-Control", "no-store")
          .endWithoutBody()
      }
      return methodNotAllowed(ex, "GET, HEAD, OPTIONS", true)
    }
    const shared = SHARE.exec(path)
    if (shared !== null) {
      const id = shared[1]!
      if (shared[2] !== undefined) {
        if (method !== "POST") return methodNotAllowed(ex, "POST")
        if (!isImageId(id)) return html(ex, 404, messagePage("Image not found", "There is no such image."))
        return report(ex, id)
      }
      if (method !== "GET" && method !== "HEAD") return methodNotAllowed(ex, "GET, HEAD")
      if (!isImageId(id)) return html(ex, 404, messagePage("Image not found", "There is no such image."))
      return share(ex, id)
    }
    if (method !== "GET" && method !== "HEAD") return methodNotAllowed(ex, "GET, HEAD")
    if (path === "/healthz") {
      return ex.writeStatus(200).writeHeader("Content-Type", TEXT).writeHeader("Cache-Control", "no-store").end("ok\n")
    }
    if (path === "/readyz") {
      const answer = ex.defer()
      return void deps.ping().then(
        () =>
          answer
            .writeStatus(200)
            .writeHeader("Content-Type", TEXT)
            .writeHeader("Cache-Control", "no-store")
            .end("ready\n"),
        () =>
          answer
            .writeStatus(503)
            .writeHeader("Content-Type", TEXT)
            .writeHeader("Cache-Control", "no-store")
            .writeHeader("Retry-After", "1")
            .end("database unreachable\n")
      )
    }
    // Anything else, an image URL of an unknown shape included: the same 404 without a rating.
    return unavailable(ex)
  }
}

export interface MediaShape {
  readonly engine: HttpEngine
  readonly port: number
}

const make = Effect.gen(function* () {
  const config = yield* AppConfig
  const blobs = yield* BlobStore
  const images = yield* ImageRepo
  const reports = yield* AbuseReportRepo
  const health = yield* DatabaseHealth
  const cacheBytes = yield* mediaCacheBytesConfig
  const reportsPerMinute = yield* mediaReportsPerMinuteConfig
  const runtime = yield* Effect.runtime<never>()
  const run = Runtime.runPromise(runtime)
  const basePath = new URL(config.imageHost).pathname.replace(/\/+$/, "")

  const lookup = (id: string) => run(images.delivery(id).pipe(Effect.map(Option.getOrUndefined)))
  const server = yield* serveHttp({
    host: "0.0.0.0",
    port: config.mediaPort,
    handler: withMetricsPath(
      makeMediaHandler({
        lookup,
        blob: (key) => run(blobs.get(key).pipe(Effect.map(Option.getOrUndefined))),
        ping: () => run(health.ping.pipe(Effect.timeout("2 seconds"), Effect.asVoid)),
        report: (id, reason) => run(reports.file(id, reason).pipe(Effect.asVoid)),
        basePath,
        cacheBytes,
        reportsPerMinute,
        trustedProxies: config.trustedProxies,
        onError: (error) => Runtime.runFork(runtime)(Effect.logError("media request failed", Cause.die(error)))
      }),
      makeMetricsAnswer(runtime)
    ),
    onError: (error) => Runtime.runFork(runtime)(Effect.logError("media handler failed", Cause.die(error)))
  }).pipe(naming("MEDIA_PORT", config.mediaPort))
  if (server.fallbackReason !== undefined) {
    yield* Effect.logWarning(`media host falls back to node:http: ${server.fallbackReason}`)
  }
  yield* Effect.logInfo(
    `media host listening on 0.0.0.0:${server.port} (${server.engine}), public base ${config.imageHost}, ` +
      `byte cache ${cacheBytes} bytes`
  )
  yield* Effect.addFinalizer(() => Effect.logInfo("media host stopping: closing the listener"))
  return { engine: server.engine, port: server.port } satisfies MediaShape
})

export class Media extends Context.Tag("Media")<Media, MediaShape>() {}

/**
 * The image host on MEDIA_PORT (0.0.0.0): image bytes with their current rating, share
 * pages and abuse reports. Needs AppConfig, BlobStore, ImageRepo, AbuseReportRepo and DatabaseHealth.
 */
export const MediaLive = Layer.scopedDiscard(make)

/** MediaLive, also handing out what it runs (port, engine): for tests and banners. */
export const MediaLayer = Layer.scoped(Media, make)
