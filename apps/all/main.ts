import { Effect, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { DatabaseLive } from "../../infra/Database.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"
import { runMain } from "../../infra/Main.js"
import { OutboxRelayLive } from "../../infra/OutboxRelay.js"
import { Plans } from "../../infra/Plans.js"
import { ApiServerLive } from "../api/Server.js"
import { RedirectorLive } from "../redirector/Redirector.js"
import { ClickProjectorLive } from "../workers/ClickProjector.js"

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
 * The embedded default: every app in one process (API, redirector, outbox relay, click
 * projector) on the embedded engines under DATA_DIR: PostgreSQL, the event log in it, chDB.
 * With DATABASE_URL / KAFKA_BROKERS / CLICKHOUSE_URL set, the same process uses those.
 */
runMain(
  Layer.mergeAll(ApiServerLive, RedirectorLive, OutboxRelayLive, ClickProjectorLive, Banner).pipe(
    Layer.provide(AnalyticsLive),
    Layer.provide(EventLogLive),
    Layer.provide(DatabaseLive),
    Layer.provide(Plans.layer),
    Layer.provide(AppConfig.layer)
  )
)
