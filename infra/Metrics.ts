import { Effect, Exit, Metric, MetricBoundaries } from "effect"

/**
 * The service's own metrics (docs/metrics.md lists each with its labels and where it is
 * recorded). Defined here, in infra, so that the adapters and every app reach the same
 * definitions; `/metrics` on each port renders them (infra/Prometheus.ts). Counters end in
 * `_total`, durations are in seconds.
 */

/** 1 ms to 10 s. */
const SHORT = MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
/** 10 ms to 2 min: image conversions, classifications, page captures. */
const LONG = MetricBoundaries.fromIterable([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120])

// The redirector (counted with plain numbers on the request path, collected at scrape time).

export const redirectorResponses = Metric.counter("redirector_responses_total", {
  description:
    "Answers of the short host by status class (3xx: redirects, 4xx: unknown, expired or refused, 5xx: starting up); health, metrics and TLS-ask requests not counted.",
  incremental: true
})
export const clicksCaptured = Metric.counter("redirector_clicks_captured_total", {
  description: "Clicks (GET redirects) recorded into the click buffer.",
  incremental: true
})
export const clicksDropped = Metric.counter("redirector_clicks_dropped_total", {
  description: "Clicks not recorded because the click buffer was full (event log unavailable for too long).",
  incremental: true
})
export const clicksSpooled = Metric.counter("redirector_clicks_spooled_total", {
  description: "Clicks written to the crash spool.",
  incremental: true
})
export const clicksPublished = Metric.counter("redirector_clicks_published_total", {
  description: "Clicks in clicks.recorded events the event log acknowledged.",
  incremental: true
})

// Workers.

export const clicksProjected = Metric.counter("click_projector_clicks_total", {
  description:
    "Clicks the click projector inserted into the analytics store (duplicates and redeliveries not counted).",
  incremental: true
})
export const projectorLag = Metric.gauge("click_projector_lag_seconds", {
  description:
    "Seconds between the event log appending the oldest event of the last projected batch and its insert into the analytics store."
})
export const outboxRelayed = Metric.counter("outbox_events_relayed_total", {
  description: "Outbox rows the relay published to the event log, by topic.",
  incremental: true
})
export const outboxDepth = Metric.gauge("outbox_depth", {
  description: "Outbox rows waiting to be published, as the relay holding the lock saw them at its last round."
})
export const conversionJobs = Metric.gauge("image_conversion_jobs", {
  description: "Conversion jobs of this process's image converter, by state (waiting in its queue, processing)."
})
export const conversionDuration = Metric.histogram(
  "image_conversion_duration_seconds",
  LONG,
  "Seconds an image conversion (decode, convert, encode) took, by outcome (converted, failed)."
)
export const classifierDuration = Metric.histogram(
  "image_classifier_duration_seconds",
  LONG,
  "Seconds a classification took (reading the bytes and the classifier), by outcome (rated, failed)."
)
export const snapshotCaptures = Metric.counter("snapshot_captures_total", {
  description: "Snapshot capture attempts by outcome (captured, retry, failed).",
  incremental: true
})
export const snapshotDuration = Metric.histogram(
  "snapshot_capture_duration_seconds",
  LONG,
  "Seconds a snapshot capture attempt took, by outcome."
)

// Engines.

export const databasePool = Metric.gauge("database_pool_connections", {
  description:
    "Connections of this process's PostgreSQL pool, by state (in_use, idle), and requests waiting for one (waiting)."
})
export const eventLogConsumerLag = Metric.gauge("eventlog_consumer_lag_records", {
  description:
    "Records of a topic a consumer group has not consumed yet, by group and topic (the partitions this process's member last looked at)."
})
/** The latency buckets of request histograms (1 ms to 10 s). */
export const REQUEST_BOUNDARIES = SHORT

/**
 * Records how long `effect` took in `histogram`, labelled `outcome` (`ok` when it succeeds,
 * `failed` otherwise); an interrupted run is not recorded.
 */
export const timed =
  (histogram: Metric.Metric.Histogram<number>, ok: string, failed: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const started = performance.now()
      return Effect.onExit(effect, (exit) =>
        Exit.isInterrupted(exit)
          ? Effect.void
          : Metric.update(
              Metric.tagged(histogram, "outcome", Exit.isSuccess(exit) ? ok : failed),
              (performance.now() - started) / 1000
            )
      )
    })
