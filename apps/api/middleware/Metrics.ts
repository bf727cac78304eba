import { type HttpApp, HttpServerRequest } from "@effect/platform"
import { Effect, Metric, MetricBoundaries, MetricLabel } from "effect"

/**
 * Requests by route and status with their latency, for `/metrics`. The route is the Api's
 * path template the request matches (`/v1/links/:id`), so ids do not multiply the series;
 * a path no route has is `unmatched`. The system routes (health, metrics, documents) are not counted.
 */

export const httpRequests = Metric.counter("http_requests_total", {
  description: "API requests answered, by method, route and status.",
  incremental: true
})
export const httpDuration = Metric.histogram(
  "http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "API request latency in seconds, by method, route and status."
)

/** The matcher of the Api's route templates (`/v1/links/:id`): the first one matching a path. */
export const routeMatcher = (templates: ReadonlyArray<string>) => {
  const compiled = [...new Set(templates)].map((template) => ({
    template,
    regex: new RegExp(
      `^${template
        .split("/")
        .map((part) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("/")}$`
    )
  }))
  // Fewer parameters first: a literal segment wins over a parameter in the same place.
  const params = (template: string) => template.split(":").length
  compiled.sort((a, b) => params(a.template) - params(b.template))
  return (path: string): string => compiled.find((c) => c.regex.test(path))?.template ?? "unmatched"
}

/** Counts each request answered by `app` (never one of `uncounted`). */
export const withMetrics =
  (templates: ReadonlyArray<string>, uncounted: ReadonlySet<string>) =>
  <R>(app: HttpApp.Default<never, R>): HttpApp.Default<never, R> => {
    const routeOf = routeMatcher(templates)
    return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const path = request.url.split("?", 1)[0]!
      if (uncounted.has(path)) return app
      const started = performance.now()
      return Effect.tap(app, (response) => {
        const tags = { method: request.method, route: routeOf(path), status: String(response.status) }
        const seconds = (performance.now() - started) / 1000
        return Effect.all([
          Metric.increment(Metric.taggedWithLabels(httpRequests, labelsOf(tags))),
          Metric.update(Metric.taggedWithLabels(httpDuration, labelsOf(tags)), seconds)
        ])
      })
    })
  }

const labelsOf = (tags: Record<string, string>) =>
  Object.entries(tags).map(([key, value]) => MetricLabel.make(key, value))
