import { Cause, Context, Effect, Layer, Option, Runtime } from "effect"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { DatabaseHealth } from "../../domain/ports/Database.js"
import { SnapshotRepo } from "../../domain/ports/SnapshotRepo.js"
import { isServed, isSnapshotId, type Manifest, snapshotBlobKey } from "../../domain/Snapshot.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { type HttpAnswer, type HttpEngine, type HttpHandler, serveHttp } from "../../infra/http/HttpServer.js"
import { makeMetricsAnswer, withMetricsPath } from "../../infra/http/MetricsAnswer.js"

/** The policy every answer of the snapshot host carries (DESIGN.md "Snapshots"). */
export const SNAPSHOT_CSP =
  "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; font-src 'self'; form-action 'none'"

const TEXT = "text/plain; charset=utf-8"
const PAGE = /^\/(snap_[0-9A-Za-z]{1,64})(\/|\/r\/([0-9a-f]{64}))?$/

export interface SnapshotHostDeps {
  /** The manifest of a snapshot the host may serve now (captured, published); undefined otherwise. */
  readonly served: (id: string) => Promise<Manifest | undefined>
  /** Stored bytes by SHA-256; undefined when missing. */
  readonly blob: (sha256: string) => Promise<Uint8Array | undefined>
  readonly ping: () => Promise<void>
  readonly onError: (error: unknown) => void
}

/** Headers of every answer: isolation, no indexing, no referrer, no sniffing, no caching past a withdrawal. */
const secured = <A extends HttpAnswer>(a: A, status: number): A =>
  a
    .writeStatus(status)
    .writeHeader("Content-Security-Policy", SNAPSHOT_CSP)
    .writeHeader("X-Robots-Tag", "noindex, nofollow")
    .writeHeader("Referrer-Policy", "no-referrer")
    .writeHeader("X-Content-Type-Options", "nosniff")
    .writeHeader("Cache-Control", "no-cache")

const notFound = (a: HttpAnswer) => secured(a, 404).writeHeader("Content-Type", TEXT).end("Snapshot not found.\n")

/**
 * The snapshot host: `/{id}/` (the page as captured, every reference rewritten to the stored
 * copies, with the capture notice), `/{id}/r/{sha256}` (a stored resource of that snapshot),
 * `/healthz`, `/readyz`. Each request reads the snapshot's state first, so a withdrawal is
 * served 404 on the very next request. No cookies are ever set.
 */
export const makeSnapshotHandler = (deps: SnapshotHostDeps): HttpHandler => {
  const deliver = (answer: ReturnType<Parameters<HttpHandler>[0]["defer"]>, id: string, sha: string | undefined) =>
    (async () => {
      const manifest = await deps.served(id)
      if (answer.aborted) return
      if (manifest === undefined) return notFound(answer)
      const entry = sha === undefined ? manifest.page : manifest.resources.find((r) => r.sha256 === sha)
      if (entry === undefined) return notFound(answer)
      const bytes = await deps.blob(entry.servedSha256)
      if (answer.aborted) return
      if (bytes === undefined) return notFound(answer)
      const type =
        entry.servedSha256 !== entry.sha256
          ? sha === undefined
            ? "text/html; charset=utf-8"
            : "text/css; charset=utf-8"
          : entry.contentType
      secured(answer, 200).writeHeader("Content-Type", type).end(bytes)
    })().catch((error) => {
      deps.onError(error)
      if (!answer.aborted)
        secured(answer, 503)
          .writeHeader("Retry-After", "1")
          .writeHeader("Content-Type", TEXT)
          .end("Temporarily unavailable.\n")
    })

  return (ex) => {
    if (ex.method !== "GET" && ex.method !== "HEAD") {
      return secured(ex, 405)
        .writeHeader("Allow", "GET, HEAD")
        .writeHeader("Content-Type", TEXT)
        .end("Method Not Allowed\n")
    }
    if (ex.path === "/healthz") return secured(ex, 200).writeHeader("Content-Type", TEXT).end("ok\n")
    if (ex.path === "/readyz") {
      const answer = ex.defer()
      return void deps.ping().then(
        () => secured(answer, 200).writeHeader("Content-Type", TEXT).end("ready\n"),
        () => secured(answer, 503).writeHeader("Content-Type", TEXT).end("database unreachable\n")
      )
    }
    const m = PAGE.exec(ex.path)
    if (m === null || !isSnapshotId(m[1]!)) return notFound(ex)
    if (m[2] === undefined) return secured(ex, 301).writeHeader("Location", `${m[1]}/`).end("")
    return void deliver(ex.defer(), m[1]!, m[3])
  }
}

export interface SnapshotHostShape {
  readonly engine: HttpEngine
  readonly port: number
}

const make = Effect.gen(function* () {
  const config = yield* AppConfig
  const blobs = yield* BlobStore
  const snapshots = yield* SnapshotRepo
  const health = yield* DatabaseHealth
  const runtime = yield* Effect.runtime<never>()
  const run = Runtime.runPromise(runtime)

  const served = (id: string) =>
    run(
      Effect.gen(function* () {
        if (!isSnapshotId(id)) return undefined
        const snapshot = yield* snapshots.byId(id)
        if (Option.isNone(snapshot) || !isServed(snapshot.value)) return undefined
        return Option.getOrUndefined(yield* snapshots.manifest(id))
      })
    )
  const server = yield* serveHttp({
    host: "0.0.0.0",
    port: config.snapshotPort,
    handler: withMetricsPath(
      makeSnapshotHandler({
        served,
        blob: (sha) => run(blobs.get(snapshotBlobKey(sha)).pipe(Effect.map(Option.getOrUndefined))),
        ping: () => run(health.ping.pipe(Effect.timeout("2 seconds"), Effect.asVoid)),
        onError: (error) => Runtime.runFork(runtime)(Effect.logError("snapshot request failed", Cause.die(error)))
      }),
      makeMetricsAnswer(runtime)
    ),
    onError: (error) => Runtime.runFork(runtime)(Effect.logError("snapshot handler failed", Cause.die(error)))
  })
  yield* Effect.logInfo(
    `snapshot host listening on 0.0.0.0:${server.port} (${server.engine}), public base ${config.snapshotHost}`
  )
  return { engine: server.engine, port: server.port } satisfies SnapshotHostShape
})

export class SnapshotHost extends Context.Tag("SnapshotHost")<SnapshotHost, SnapshotHostShape>() {}

/** The snapshot host on SNAPSHOT_PORT (0.0.0.0). Needs AppConfig, BlobStore, SnapshotRepo and DatabaseHealth. */
export const SnapshotHostLive = Layer.scopedDiscard(make)

/** The same, handing out what it runs (port, engine): for tests. */
export const SnapshotHostLayer = Layer.scoped(SnapshotHost, make)
