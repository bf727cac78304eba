import { Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { AnalyticsLive } from "../../infra/analytics/AnalyticsLive.js"
import { EventLogLive } from "../../infra/eventlog/EventLogLive.js"

/**
 * What `replay` needs besides the database: the analytics store and the event log. Only
 * replay opens them (and only replay loads this module), so the other commands start fast
 * and work while the service runs.
 */
export const ReplayLive = Layer.merge(AnalyticsLive, EventLogLive).pipe(Layer.provide(AppConfig.layer))
