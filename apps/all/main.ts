import { Effect, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { ClassifierLive } from "../../infra/classifier/ClassifierLive.js"
import { CodecLive } from "../../infra/codec/ImageCodec.js"
import { DatabaseLive } from "../../infra/Database.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"
import { SafeFetcherLive } from "../../infra/fetcher/SafeFetcher.js"
import { runMain } from "../../infra/Main.js"
import { Plans } from "../../infra/Plans.js"
import { DatabasePortsLive, ImageReposLive } from "../../infra/postgres/Layers.js"
import { LinkRepoLive } from "../../infra/postgres/Links.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { OutboxRelayLive } from "../../infra/postgres/OutboxRelay.js"
import { VisitorSecretRepoLive } from "../../infra/postgres/VisitorSecrets.js"
import { ApiServerLive } from "../api/Server.js"
import { MediaLive } from "../media/Media.js"
import { RedirectorLive } from "../redirector/Redirector.js"
import { ClickProjectorLive } from "../workers/ClickProjector.js"
import { ImageClassifierLive } from "../workers/ImageClassifier.js"
import { ImageConverterLive } from "../workers/ImageConverter.js"

const Banner = Layer.scopedDiscard(
  Effect.gen(function* () {
    const c = yield* AppConfig
    yield* Effect.logInfo(
      `ready: API ${c.apiBase} (OpenAPI ${c.apiBase}/openapi.json), short links ${c.shortBase}, images ${c.imageHost}`
    )
    yield* Effect.addFinalizer(() =>
      Effect.logInfo("stopping: finishing in-flight requests, flushing clicks, then the engines")
    )
  })
)

/**
 * The embedded default: every app in one process (API, redirector, image host, outbox relay,
 * click projector, image converter and classifier) on the embedded engines under DATA_DIR:
 * PostgreSQL, the event log in it, chDB, files. With DATABASE_URL / KAFKA_BROKERS /
 * CLICKHOUSE_URL / S3_BUCKET set, the same process uses those.
 */
runMain(
  Layer.mergeAll(
    ApiServerLive,
    RedirectorLive,
    MediaLive,
    OutboxRelayLive,
    ClickProjectorLive,
    ImageConverterLive,
    ImageClassifierLive.pipe(Layer.provide(ClassifierLive)),
    Banner
  ).pipe(
    Layer.provide(ImageReposLive.pipe(Layer.provide(OutboxLive))),
    Layer.provide(Layer.mergeAll(LinkRepoLive, VisitorSecretRepoLive, DatabasePortsLive)),
    Layer.provide(AnalyticsLive),
    Layer.provide(CodecLive),
    Layer.provide(SafeFetcherLive),
    Layer.provide(BlobStoreLive),
    Layer.provide(EventLogLive),
    Layer.provide(DatabaseLive),
    Layer.provide(Plans.layer),
    Layer.provide(AppConfig.layer)
  )
)
