import { Runtime } from "effect"
import { PROMETHEUS_CONTENT_TYPE, prometheusText } from "../Prometheus.js"
import type { HttpExchange, HttpHandler } from "./HttpServer.js"

/** Where every app's port serves its process's metrics. */
export const METRICS_PATH = "/metrics"

/**
 * The `/metrics` answer of the uWebSockets.js / node:http apps (redirector, image host,
 * snapshot host): the process registry in Prometheus' text format, no key; GET and HEAD only.
 */
export const makeMetricsAnswer = (runtime: Runtime.Runtime<never>) => {
  const render = Runtime.runPromise(runtime)
  return (ex: HttpExchange): void => {
    if (ex.method !== "GET" && ex.method !== "HEAD") {
      ex.writeStatus(405)
        .writeHeader("Allow", "GET, HEAD")
        .writeHeader("Content-Type", "text/plain; charset=utf-8")
        .end("Method Not Allowed\n")
      return
    }
    const answer = ex.defer()
    render(prometheusText).then(
      (text) =>
        answer
          .writeStatus(200)
          .writeHeader("Content-Type", PROMETHEUS_CONTENT_TYPE)
          .writeHeader("Cache-Control", "no-store")
          .end(text),
      () =>
        answer
          .writeStatus(500)
          .writeHeader("Content-Type", "text/plain; charset=utf-8")
          .writeHeader("Cache-Control", "no-store")
          .end("metrics unavailable\n")
    )
  }
}

/** `handler`, with `/metrics` answered first (an app whose other paths never use it). */
export const withMetricsPath =
  (handler: HttpHandler, metrics: HttpHandler): HttpHandler =>
  (ex) =>
    ex.path === METRICS_PATH ? metrics(ex) : handler(ex)
