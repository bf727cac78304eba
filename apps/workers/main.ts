import { Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { ClassifierLive } from "../../infra/classifier/ClassifierLive.js"
import { CodecLive } from "../../infra/codec/ImageCodec.js"
import { DatabaseLive } from "../../infra/Database.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"
import { runMain } from "../../infra/Main.js"
import { DatabasePortsLive, ImageReposLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { OutboxRelayLive } from "../../infra/postgres/OutboxRelay.js"
import { ClickProjectorLive } from "./ClickProjector.js"
import { WorkersHealthLive } from "./Health.js"
import { ImageClassifierLive } from "./ImageClassifier.js"
import { ImageConverterLive } from "./ImageConverter.js"

// The consumers on their own (`npm run start:workers`): the outbox relay (one publishes at a
// time, the others wait on its lock), and the consumer groups, whose copies share the
// partitions: the click projector, the image converter (jobs under durable leases) and the
// image classifier. Health on WORKERS_PORT once they run.
runMain(
  WorkersHealthLive.pipe(
    Layer.provide(
      Layer.mergeAll(
        OutboxRelayLive,
        ClickProjectorLive,
        ImageConverterLive,
        ImageClassifierLive.pipe(Layer.provide(ClassifierLive))
      )
    ),
    Layer.provide(ImageReposLive.pipe(Layer.provide(OutboxLive))),
    Layer.provide(DatabasePortsLive),
    Layer.provideMerge(AnalyticsLive),
    Layer.provide(CodecLive),
    Layer.provide(BlobStoreLive),
    Layer.provide(EventLogLive),
    Layer.provide(DatabaseLive),
    Layer.provide(AppConfig.layer)
  )
)
