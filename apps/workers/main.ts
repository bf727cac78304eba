import { Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { BlobStoreLive } from "../../infra/blobstore/BlobStoreLive.js"
import { CodecLive } from "../../infra/codec/ImageCodec.js"
import { DatabaseLive } from "../../infra/Database.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"
import { SafeFetcherLive } from "../../infra/fetcher/SafeFetcher.js"
import { runMain } from "../../infra/Main.js"
import { Plans } from "../../infra/Plans.js"
import { TracingLive } from "../../infra/Tracing.js"
import { WorkersHealthLive } from "./Health.js"
import { WorkersAppLive } from "./Live.js"

// The consumers on their own (`npm run start:workers`), with health on WORKERS_PORT once they run.
runMain(
  WorkersHealthLive.pipe(
    Layer.provide(WorkersAppLive),
    Layer.provideMerge(AnalyticsLive),
    Layer.provide(CodecLive),
    Layer.provide(BlobStoreLive),
    Layer.provide(SafeFetcherLive),
    Layer.provide(EventLogLive),
    Layer.provide(DatabaseLive),
    Layer.provide(Plans.layer),
    Layer.provide(AppConfig.layer),
    // Outermost: the tracer is set before any app starts, and flushes after the last one stopped.
    Layer.provide(TracingLive("shortlinks-workers"))
  )
)
