import { createHash, createHmac, randomBytes } from "node:crypto"
import { Cause, Config, Context, Effect, Layer, Option, Runtime } from "effect"
import { type ImageDelivery, isImageId } from "../../domain/Image.js"
import { AbuseReportRepo } from "../../domain/ports/AbuseReportRepo.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { DatabaseHealth } from "../../domain/ports/Database.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { AppConfig } from "../../infra/AppConfig.js"
import {
  type DeferredAnswer,
  type HttpAnswer,
  type HttpEngine,
  type HttpExchange,
  type HttpHandler,
  serveHttp
} from "../../infra/http/HttpServer.js"
import { makeRateLimiter, retryAfterSeconds } from "../../infra/RateLimiter.js"
import { messagePage, PAGE_CSP, REASON_MAX_CHARS, sharePage } from "./SharePage.js"

const HTML = "text/html; charset=utf-8"
const TEXT = "text/plain; charset=utf-8"
const SVG = "image/svg+xml"
const RATING_HEADER = "X-Service-Content-Rating"
/** Largest report body read (the form has one field of at most 1000 characters). */
export const REPORT_BODY_MAX_BYTES = 8 * 1024
/** Reports one image may receive per minute, from everyone together. */
export const REPORTS_PER_IMAGE_PER_MINUTE = 20

const placeholder = (text: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" width="320" height="180" viewBox="0 0 320 180">` +
  `<rect width="320" height="180" fill="#e5e5e5"/>` +
  `<text x="160" y="96" font-family="sans-serif" font-size="18" fill="#555" text-anchor="middle">${text}</text></svg>\n`

/** What a processing image answers (202, no rating header). */
export const PROCESSING_PLACEHOLDER = placeholder("Processing…")
/** What an unknown, deleted, failed or mistyped image URL answers (404, no rating header). */
export const UNAVAILABLE_PLACEHOLDER = placeholder("Image not available")

/** One image's delivery state: one primary-key lookup per request, never a projection. */
export type ImageState = ImageDelivery

/** MEDIA_CACHE_BYTES: the in-memory cache of image bytes, bounded by their total size (0: off). */
export const mediaCacheBytesConfig = Config.integer("MEDIA_CACHE_BYTES").pipe(
  Config.validate({ message: "must be a whole number of bytes, 0 or more", validation: (n) => n >= 0 }),
  Config.withDefault(256 * 1024 * 1024)
)

/** MEDIA_REPORTS_PER_MINUTE: abuse reports one client address may file per minute. */
export const mediaReportsPerMinuteConfig = Config.integer("MEDIA_REPORTS_PER_MINUTE").pipe(
  Config.validate({ message: "must be a whole number, 1 or more", validation: (n) => n >= 1 }),
  Config.withDefault(5)
)

/**
 * Least recently used byte arrays, bounded by their total size. Keys are blob keys, whose
 * bytes never change, so an entry is never stale; one larger than an eighth of the bound
 * is not kept (it would flush everything else).
 */
export class ByteLru {
  private readonly entries = new Map<string, Uint8Array>()
  size = 0
  constructor(readonly maxBytes: number) {}
  get(key: string): Uint8Array | undefined {
    const bytes = this.entries.get(key)
    if (bytes !== undefined) {
      this.entries.delete(key)
      this.entries.set(key, bytes)
    }
    return bytes
  }
  set(key: string, bytes: Uint8Array): void {
    if (bytes.byteLength > this.maxBytes / 8 || this.entries.has(key)) return
    this.entries.set(key, bytes)
    this.size += bytes.byteLength
    for (const [k, v] of this.entries) {
      if (this.size <= this.maxBytes) break
      this.entries.delete(k)
      this.size -= v.byteLength
    }
  }
}

export interface MediaDeps {
  /** The image's state now; undefined when there is no such id. Rejects when the database fails. */
  readonly lookup: (id: string) => Promise<ImageState | undefined>
  /** The published bytes; undefined when the store has no such object. Rejects when it fails. */
  readonly blob: (key: string) => Promise<Uint8Array | undefined>
  readonly ping: () => Promise<void>
  readonly report: (id: string, reason: string) => Promise<void>
  /** Path prefix of PUBLIC_IMAGE_HOST ("" at the root). */
  readonly basePath: string
  readonly cacheBytes: number
  readonly reportsPerMinute: number
  readonly onError: (error: unknown) => void
}

const DELIVERY = /^\/([A-Za-z0-9_-]{7,64})\.([A-Za-z0-9]{1,8})$/
const SHARE = /^\/v\/([^/]+)(\/report)?$/

/** A strong validator from the blob key: the bytes under a key never change. */
const etagOf = (blobKey: string) => `"${createHash("sha256").update(blobKey).digest("base64url").slice(0, 27)}"`

/** If-None-Match (weak comparison, as RFC 9110 asks for it), `*` included. */
const matches = (ifNoneMatch: string, etag: string) => {
  if (ifNoneMatch === "") return false
  for (const raw of ifNoneMatch.split(",")) {
    const tag = raw.trim()
    if (tag === "*" || tag === etag || tag === `W/${etag}`) return true
  }
  return false
}

const cors = <A extends HttpAnswer>(a: A): A =>
  a.writeHeader("Access-Control-Allow-Origin", "*").writeHeader("Access-Control-Expose-Headers", RATING_HEADER)

const unavailable = (a: HttpAnswer) =>
  cors(a.writeStatus(404))
    .writeHeader("Content-Type", SVG)
    .writeHeader("Cache-Control", "no-store")
    .writeHeader("X-Content-Type-Options", "nosniff")
    .writeHeader("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
    .end(UNAVAILABLE_PLACEHOLDER)

const processing = (a: HttpAnswer) =>
  cors(a.writeStatus(202))
    .writeHeader("Content-Type", SVG)
    .writeHeader("Cache-Control", "no-store")
    .writeHeader("X-Content-Type-Options", "nosniff")
    .writeHeader("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
    .writeHeader("Retry-After", "1")
    .end(PROCESSING_PLACEHOLDER)

const unavailableNow = (a: HttpAnswer) =>
  a
    .writeStatus(503)
    .writeHeader("Content-Type", TEXT)
    .writeHeader("Cache-Control", "no-store")
    .writeHeader("Retry-After", "1")
    .end("Temporarily unavailable, try again in a moment.\n")

/** Status first: uWebSockets.js writes "200 OK" itself when a header comes before it. */
const html = (a: HttpAnswer, status: number, body: string, extra?: readonly [string, string]) => {
  a.writeStatus(status)
  if (extra !== undefined) a.writeHeader(extra[0], extra[1])
  a.writeHeader("Content-Type", HTML)
    .writeHeader("Cache-Control", "no-store")
    .writeHeader("X-Content-Type-Options", "nosniff")
    .writeHeader("Content-Security-Policy", PAGE_CSP)
    .writeHeader("Referrer-Policy", "no-referrer")
    .end(body)
}

const methodNotAllowed = (a: HttpAnswer, allow: string, withCors = false) => {
  a.writeStatus(405)
  if (withCors) cors(a)
  a.writeHeader("Allow", allow).writeHeader("Content-Type", TEXT).end("Method Not Allowed\n")
}

const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~, -]{0,1000}$/

/** A form body's `reason`: trimmed, control characters but tab and line breaks removed. */
const parseReason = (body: Uint8Array): string | undefined => {
  let text: string
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body)
  } catch {
    return undefined
  }
  const reason = new URLSearchParams(text).get("reason")
  if (reason === null) return undefined
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
  const clean = reason.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, "").trim()
  return clean === "" || [...clean].length > REASON_MAX_CHARS ? undefined : clean
}

/**
 * The image host: `/{id}.{ext}` (bytes with the current rating), `/v/{id}` (share page),
 * `/v/{id}/report` (abuse reports), `/healthz`, `/readyz`. Every image answer looks the
 * image up in PostgreSQL first, so a rating change shows on the very next request; only the
 * immutable bytes are cached.
 */
export const makeMediaHandler = (deps: MediaDeps): HttpHandler => {
  const cache = new ByteLru(deps.cacheBytes)
  const loading = new Map<string, Promise<Uint8Array | undefined>>()
  // Reports per client address and per image: a minute's allowance at once, refilled evenly.
  const limiter = makeRateLimiter({ maxKeys: 100_000 })
  const perClient = { perSecond: deps.reportsPerMinute / 60, burst: deps.reportsPerMinute }
  const perImage = { perSecond: REPORTS_PER_IMAGE_PER_MINUTE / 60, burst: REPORTS_PER_IMAGE_PER_MINUTE }
  // Client addresses only ever appear keyed with a secret of this process: never stored.
  const clientSecret = randomBytes(32)

  const bytesOf = (key: string): Promise<Uint8Array | undefined> => {
    const cached = cache.get(key)
    if (cached !== undefined) return Promise.resolve(cached)
    let pending = loading.get(key)
    if (pending === undefined) {
      pending = deps.blob(key).then(
        (bytes) => {
          loading.delete(key)
          if (bytes !== undefined) cache.set(key, bytes)
          return bytes
        },
        (error) => {
          loading.delete(key)
          throw error
        }
      )
      loading.set(key, pending)
    }
    return pending
  }

  /** Runs an answer later; whatever fails on the way is a 503, never a dangling request. */
  const later = (answer: DeferredAnswer, work: () => Promise<void>) => {
    work().catch((error) => {
      deps.onError(error)
      if (!answer.aborted) {
        try {
          unavailableNow(answer)
        } catch {
          // Already ended.
        }
      }
    })
  }

  const deliver = (ex: HttpExchange, id: string, ext: string) => {
    const ifNoneMatch = ex.header("if-none-match")
    const answer = ex.defer()
    later(answer, async () => {
      const image = await deps.lookup(id)
      if (image === undefined || image.deleted || image.status === "failed" || image.ext !== ext) {
        return unavailable(answer)
      }
      if (image.status === "processing") return processing(answer)
      if (image.blob_key === null || image.mime_type === null) return unavailable(answer)
      const etag = etagOf(image.blob_key)
      const headers = (a: DeferredAnswer) =>
        cors(a)
          .writeHeader(RATING_HEADER, image.rating)
          .writeHeader("Cache-Control", "no-store")
          .writeHeader("X-Content-Type-Options", "nosniff")
          .writeHeader("ETag", etag)
      if (matches(ifNoneMatch, etag)) return headers(answer.writeStatus(304)).endWithoutBody()
      const bytes = await bytesOf(image.blob_key)
      if (bytes === undefined) {
        deps.onError(new Error(`image ${id} is ready but its blob ${image.blob_key} is missing`))
        return unavailable(answer)
      }
      headers(answer.writeStatus(200)).writeHeader("Content-Type", image.mime_type).end(bytes)
    })
  }

  const share = (ex: HttpExchange, id: string) => {
    const reported = /(^|&)reported=1(&|$)/.test(ex.query())
    const answer = ex.defer()
    later(answer, async () => {
      const image = await deps.lookup(id)
      if (image === undefined || image.deleted || image.status === "failed" || image.ext === null) {
        return html(answer, 404, messagePage("Image not found", "This image does not exist or was removed."))
      }
      html(
        answer,
        200,
        sharePage({
          id,
          imagePath: `${deps.basePath}/${id}.${image.ext}`,
          reportPath: `${deps.basePath}/v/${id}/report`,
          rating: image.status === "ready" ? image.rating : undefined,
          reported
        })
      )
    })
  }

  const tooMany = (a: HttpAnswer, retryAfter: number) =>
    a
      .writeStatus(429)
      .writeHeader("Retry-After", String(retryAfter))
      .writeHeader("Content-Type", HTML)
      .writeHeader("Cache-Control", "no-store")
      .writeHeader("Content-Security-Policy", PAGE_CSP)
      .end(messagePage("Too many reports", `Please wait ${retryAfter} seconds before reporting again.`))

  const report = (ex: HttpExchange, id: string) => {
    const client = createHmac("sha256", clientSecret).update(ex.remoteAddress()).digest("base64url")
    const wait = limiter.take(`client ${client}`, perClient)
    const isForm = /^application\/x-www-form-urlencoded\s*(;|$)/.test(ex.header("content-type").toLowerCase())
    // The body is read (up to the cap) before any answer, so the connection stays usable.
    const { answer, body } = ex.readBody(REPORT_BODY_MAX_BYTES)
    later(answer, async () => {
      const bytes = await body
      if (answer.aborted) return
      if (wait > 0) return tooMany(answer, retryAfterSeconds(wait))
      if (!isForm) {
        return html(
          answer,
          415,
          messagePage("Unsupported form", "Send the report form as application/x-www-form-urlencoded."),
          ["Accept-Post", "application/x-www-form-urlencoded"]
        )
      }
      if (bytes === undefined) {
        return html(
          answer,
          413,
          messagePage("Report too large", `A reason has at most ${REASON_MAX_CHARS} characters.`)
        )
      }
      const reason = parseReason(bytes)
      if (reason === undefined) {
        return html(
          answer,
          400,
          messagePage("Reason missing", `Say what is wrong with the image, in 1 to ${REASON_MAX_CHARS} characters.`)
        )
      }
      const image = await deps.lookup(id)
      if (image === undefined || image.deleted || image.status === "failed") {
        return html(answer, 404, messagePage("Image not found", "This image does not exist or was removed."))
      }
      const imageWait = limiter.take(`image ${id}`, perImage)
      if (imageWait > 0) return tooMany(answer, retryAfterSeconds(imageWait))
      await deps.report(id, reason)
      answer
        .writeStatus(303)
        .writeHeader("Location", `${deps.basePath}/v/${id}?reported=1`)
        .writeHeader("Cache-Control", "no-store")
        .writeHeader("Content-Type", TEXT)
        .end("Thank you, your report was filed.\n")
    })
  }

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
    handler: makeMediaHandler({
      lookup,
      blob: (key) => run(blobs.get(key).pipe(Effect.map(Option.getOrUndefined))),
      ping: () => run(health.ping.pipe(Effect.timeout("2 seconds"), Effect.asVoid)),
      report: (id, reason) => run(reports.file(id, reason).pipe(Effect.asVoid)),
      basePath,
      cacheBytes,
      reportsPerMinute,
      onError: (error) => Runtime.runFork(runtime)(Effect.logError("media request failed", Cause.die(error)))
    }),
    onError: (error) => Runtime.runFork(runtime)(Effect.logError("media handler failed", Cause.die(error)))
  })
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
