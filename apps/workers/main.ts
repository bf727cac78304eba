import { Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { DatabaseLive } from "../../infra/Database.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"
import { runMain } from "../../infra/Main.js"
import { OutboxRelayLive } from "../../infra/OutboxRelay.js"
import { ClickProjectorLive } from "./ClickProjector.js"
import { WorkersHealthLive } from "./Health.js"

// The consumers on their own (`npm run start:workers`): the outbox relay (one publishes at a
// time, the others wait on its lock) and the click projector (a consumer group: copies share
// the partitions). Health on WORKERS_PORT once they run.
runMain(
  WorkersHealthLive.pipe(
    Layer.provide(Layer.mergeAll(OutboxRelayLive, ClickProjectorLive)),
    Layer.provideMerge(AnalyticsLive),
    Layer.provide(EventLogLive),
    Layer.provide(DatabaseLive),
    Layer.provide(AppConfig.layer)
  )
)
