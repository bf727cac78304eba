import { createServer } from "node:http"
import { Effect, Layer, Runtime } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { METRICS_PATH } from "../../infra/http/MetricsAnswer.js"
import { PROMETHEUS_CONTENT_TYPE, prometheusText } from "../../infra/Prometheus.js"
import { listenFailed } from "../../infra/StartupError.js"

/**
 * `/healthz`, `/readyz` and `/metrics` (Prometheus text, no key) of a workers process on
 * WORKERS_PORT: the layer is built after the consumers it sits beside, so answering at all
 * means they have started.
 */
export const WorkersHealthLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const { workersPort } = yield* AppConfig
    const render = Runtime.runPromise(yield* Effect.runtime<never>())
    const server = createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0]
      if (path === METRICS_PATH && (req.method === "GET" || req.method === "HEAD")) {
        render(prometheusText).then(
          (text) =>
            res.writeHead(200, { "content-type": PROMETHEUS_CONTENT_TYPE, "cache-control": "no-store" }).end(text),
          () => res.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end("metrics unavailable\n")
        )
        return
      }
      const ok = path === "/healthz" || path === "/readyz"
      res.writeHead(ok ? 200 : 404, { "content-type": "application/json" })
      res.end(ok ? '{"status":"ok"}' : '{"error":{"code":"not_found","message":"Not found."}}')
    })
    yield* Effect.acquireRelease(
      Effect.async<void, Error>((resume) => {
        server.once("error", (e) => resume(Effect.fail(e)))
        server.listen(workersPort, "0.0.0.0", () => resume(Effect.void))
      }).pipe(Effect.mapError(listenFailed("WORKERS_PORT", workersPort))),
      () =>
        Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
        })
    )
    yield* Effect.logInfo(`workers: health and metrics on port ${workersPort}`)
  })
)
