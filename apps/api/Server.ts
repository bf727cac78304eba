import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { Effect, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { nodeServerLayer } from "../../infra/NodeServer.js"
import { AccountRepoCachedLive } from "../../infra/postgres/Accounts.js"
import { IdempotencyStoreLive } from "../../infra/postgres/Idempotency.js"
import { ImageReposLive } from "../../infra/postgres/Layers.js"
import { LinkRepoLive } from "../../infra/postgres/Links.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { UsageRepoLive } from "../../infra/postgres/Usage.js"
import { UtmPresetRepoLive } from "../../infra/postgres/UtmPresets.js"
import { AnalyticsHttp } from "./Analytics/Http.js"
import { Api } from "./Api.js"
import { ImagesHttp } from "./Images/Http.js"
import { LinksHttp } from "./Links/Http.js"
import { makePipeline } from "./Pipeline.js"
import { Authentication, AuthenticationLive } from "./Security.js"
import { UsageHttp } from "./Usage/Http.js"
import { UtmPresetsHttp } from "./UtmPresets/Http.js"

const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide(LinksHttp),
  Layer.provide(UtmPresetsHttp),
  Layer.provide(AnalyticsHttp),
  Layer.provide(ImagesHttp),
  Layer.provide(UsageHttp),
  Layer.provide(Layer.succeed(Authentication, AuthenticationLive))
)

const Repositories = Layer.mergeAll(
  AccountRepoCachedLive,
  IdempotencyStoreLive,
  ImageReposLive,
  LinkRepoLive,
  UsageRepoLive,
  UtmPresetRepoLive
  // The images repository appends its events to the outbox itself.
).pipe(Layer.provideMerge(OutboxLive))

/**
 * The API's routes behind the pipeline; needs an HttpServer, the database, the config, the
 * plans, Analytics, the image Codec and the SafeFetcher (from the composition root).
 */
// The pipeline wraps the app itself (not HttpServer.serve's middleware slot, which runs
// after the response is written) so that it can replay, rewrite and roll back.
export const ApiHttpLive = Layer.unwrapScoped(
  Effect.gen(function* () {
    const pipeline = yield* makePipeline
    const app = yield* HttpApiBuilder.httpApp
    return HttpServer.serve(pipeline(app))
  })
).pipe(
  Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer]),
  Layer.provide(ApiLive),
  Layer.provide(Repositories)
)

/** The API on its own port (API_PORT); the composition root provides the analytics store. */
export const ApiServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    ApiHttpLive.pipe(HttpServer.withLogAddress, Layer.provide(nodeServerLayer({ port: config.apiPort })))
  )
)
