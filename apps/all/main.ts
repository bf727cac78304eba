import { Effect, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { CodecLive } from "../../infra/codec/ImageCodec.js"
import { DatabaseLive } from "../../infra/Database.js"
import { DnsResolverLive } from "../../infra/dns/DnsResolver.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"
import { SafeFetcherLive } from "../../infra/fetcher/SafeFetcher.js"
import { runMain } from "../../infra/Main.js"
import { Plans } from "../../infra/Plans.js"
import { TracingLive } from "../../infra/Tracing.js"
import { ApiServerLive } from "../api/Live.js"
import { MediaAppLive } from "../media/Live.js"
import { RedirectorAppLive } from "../redirector/Live.js"
import { SnapshotsAppLive } from "../snapshots/Live.js"
import { WorkersAppLive } from "../workers/Live.js"

const Banner = Layer.scopedDiscard(
  Effect.gen(function* () {
    const c = yield* AppConfig
    // Built after every app (below): each listener is bound by now.
    yield* Effect.logInfo(
      `ready: API ${c.apiBase} (reference ${c.apiBase}/docs), short links ${c.shortBase}, images ${c.imageHost}, snapshots ${c.snapshotHost}`
    ).pipe(Effect.annotateLogs({ api: c.apiBase, short: c.shortBase, images: c.imageHost, snapshots: c.snapshotHost }))
    yield* Effect.addFinalizer(() =>
      Effect.logInfo("stopping: finishing in-flight requests, flushing clicks, then the engines")
    )
  })
)

/**
 * The embedded default: every app's composition root in one process (API, redirector, image
 * host, snapshot host, and the workers: outbox relay, click projector, image converter and classifier) on
 * the engines, shared (each is built once): by default the embedded ones under DATA_DIR:
 * PostgreSQL, the event log in it, chDB, files. With DATABASE_URL / KAFKA_BROKERS /
 * CLICKHOUSE_URL / S3_BUCKET set, the same process uses those.
 */
runMain(
  Banner.pipe(
    Layer.provide(Layer.mergeAll(ApiServerLive, RedirectorAppLive, MediaAppLive, SnapshotsAppLive, WorkersAppLive)),
    Layer.provide(AnalyticsLive),
    Layer.provide(CodecLive),
    Layer.provide(SafeFetcherLive),
    Layer.provide(DnsResolverLive),
    Layer.provide(BlobStoreLive),
    Layer.provide(EventLogLive),
    Layer.provide(DatabaseLive),
    Layer.provide(Plans.layer),
    Layer.provide(AppConfig.layer),
    // Outermost: the tracer is set before any app starts, and flushes after the last one stopped.
    Layer.provide(TracingLive("shortlinks"))
  )
)
