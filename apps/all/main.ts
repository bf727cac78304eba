import { Effect, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { ClassifierLive } from "../../infra/classifier/ClassifierLive.js"
import { CodecLive } from "../../infra/codec/ImageCodec.js"
import { DatabaseLive } from "../../infra/Database.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"
import { SafeFetcher } from "../../infra/fetcher/SafeFetcher.js"
import { Images } from "../../infra/Images.js"
import { runMain } from "../../infra/Main.js"
import { Outbox } from "../../infra/Outbox.js"
import { OutboxRelayLive } from "../../infra/OutboxRelay.js"
import { Plans } from "../../infra/Plans.js"
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
    Layer.provide(Images.layer.pipe(Layer.provide(Outbox.layer))),
    Layer.provide(AnalyticsLive),
    Layer.provide(CodecLive),
    Layer.provide(SafeFetcher.live),
    Layer.provide(BlobStoreLive),
    Layer.provide(EventLogLive),
    Layer.provide(DatabaseLive),
    Layer.provide(Plans.layer),
    Layer.provide(AppConfig.layer)
  )
)
