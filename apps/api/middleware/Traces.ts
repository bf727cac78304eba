import { HttpMiddleware } from "@effect/platform"
import type { Layer } from "effect"

/**
 * The system routes (health, `/metrics`, the documents) start no request span: probes and
 * scrapes every few seconds would bury the traces worth reading. `untraced` holds their paths.
 */
export const withoutSystemTraces =
  (untraced: ReadonlySet<string>) =>
  <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
    HttpMiddleware.withTracerDisabledWhen(layer, (request) => {
      const query = request.url.indexOf("?")
      return untraced.has(query === -1 ? request.url : request.url.slice(0, query))
    })
