import { Effect, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { DatabaseLive } from "../../infra/Database.js"
import { runMain } from "../../infra/Main.js"
import { Plans } from "../../infra/Plans.js"
import { ApiServerLive } from "../api/Server.js"

const Banner = Layer.scopedDiscard(
  Effect.gen(function* () {
    const c = yield* AppConfig
    yield* Effect.logInfo(
      `ready: API ${c.apiBase} (OpenAPI ${c.apiBase}/openapi.json), short links ${c.shortBase}, images ${c.imageHost}`
    )
    yield* Effect.addFinalizer(() => Effect.logInfo("stopping: finishing in-flight requests, then the database"))
  })
)

/** The embedded default: every app in one process, on the embedded engines under DATA_DIR. */
runMain(
  Layer.mergeAll(ApiServerLive, Banner).pipe(
    Layer.provide(DatabaseLive),
    Layer.provide(Plans.layer),
    Layer.provide(AppConfig.layer)
  )
)
