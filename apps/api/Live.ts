import { HttpApiBuilder, HttpRouter, HttpServer } from "@effect/platform"
import { Effect, Layer } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { nodeServerLayer } from "../../infra/NodeServer.js"
import { AccountRepoCachedLive } from "../../infra/postgres/Accounts.js"
import { DomainRepoLive } from "../../infra/postgres/Domains.js"
import { IdempotencyStoreLive } from "../../infra/postgres/Idempotency.js"
import { DatabasePortsLive, ImageReposLive } from "../../infra/postgres/Layers.js"
import { LinkRepoLive } from "../../infra/postgres/Links.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { SnapshotReposLive } from "../../infra/postgres/Snapshots.js"
import { UsageRepoLive } from "../../infra/postgres/Usage.js"
import { UtmPresetRepoLive } from "../../infra/postgres/UtmPresets.js"
import { listenFailed } from "../../infra/StartupError.js"
import { AnalyticsHttp } from "./Analytics/Http.js"
import { Api } from "./Api.js"
import { asyncApiDocument } from "./AsyncApiDoc.js"
import { DOCS_CSP, docsPageHtml, scalarBundle } from "./DocsPage.js"
import { Domains } from "./Domains/Domains.js"
import { DomainsHttp } from "./Domains/Http.js"
import { ImagesHttp } from "./Images/Http.js"
import { Images } from "./Images/Images.js"
import { LinksHttp } from "./Links/Http.js"
import { Links } from "./Links/Links.js"
import { AuthenticationLive } from "./middleware/Authentication.js"
import { errorEnvelopeLive } from "./middleware/ErrorEnvelope.js"
import { IdempotencyKeyLive, IdempotentOperations } from "./middleware/Idempotency.js"
import { JsonBodyLive } from "./middleware/JsonBody.js"
import { makeAllowedMethods } from "./middleware/Methods.js"
import { withMetrics } from "./middleware/Metrics.js"
import { RateLimitLive } from "./middleware/RateLimit.js"
import { guardRequests } from "./middleware/RequestGuards.js"
import { withRequestId } from "./middleware/RequestId.js"
import { makeSystemRoutes, systemPaths } from "./middleware/System.js"
import { withoutSystemTraces } from "./middleware/Traces.js"
import { closeUnreadUploads, UploadBodyLive } from "./middleware/UploadBody.js"
import { API_PREFIX, endpoints, openApiDocumentFor } from "./OpenApiDoc.js"
import { SnapshotsHttp } from "./Snapshots/Http.js"
import { Snapshots } from "./Snapshots/Snapshots.js"
import { UsageHttp } from "./Usage/Http.js"
import { Usage } from "./Usage/Usage.js"
import { UtmPresetsHttp } from "./UtmPresets/Http.js"
import { UtmPresets } from "./UtmPresets/UtmPresets.js"

/** The methods each path of the API takes: 405 with Allow for another. */
const allowedMethods = makeAllowedMethods(endpoints)

/** The endpoints' middlewares, in the order a request meets them (see docs/architecture.md). */
const Middlewares = Layer.mergeAll(
  AuthenticationLive(Api).pipe(Layer.provide(RateLimitLive)),
  IdempotencyKeyLive,
  JsonBodyLive,
  UploadBodyLive,
  IdempotentOperations.Default
)

const ApiLive = HttpApiBuilder.api(Api).pipe(
  Layer.provide([LinksHttp, UtmPresetsHttp, AnalyticsHttp, ImagesHttp, DomainsHttp, SnapshotsHttp, UsageHttp]),
  Layer.provide([Links.Default, UtmPresets.Default, Images.Default, Domains.Default, Snapshots.Default, Usage.Default]),
  Layer.provide(Middlewares)
)

const Repositories = Layer.mergeAll(
  AccountRepoCachedLive,
  DomainRepoLive,
  IdempotencyStoreLive,
  ImageReposLive,
  LinkRepoLive,
  UsageRepoLive,
  UtmPresetRepoLive,
  SnapshotReposLive,
  DatabasePortsLive
  // The images repository appends its events to the outbox itself.
).pipe(Layer.provideMerge(OutboxLive))

/**
 * The API: request id and the error envelope, the request guards and the system routes
 * around HttpApi's app, whose endpoints carry their own middlewares (authentication with
 * rate and scope, idempotency key, body). Needs an HttpServer, the database, the config,
 * the plans, Analytics, the image Codec, the BlobStore, the SafeFetcher and the DnsResolver.
 */
export const ApiHttpLive = Layer.unwrapScoped(
  Effect.gen(function* () {
    const system = yield* makeSystemRoutes({
      prefix: API_PREFIX,
      openApi: openApiDocumentFor,
      asyncApi: asyncApiDocument,
      docsPage: docsPageHtml,
      docsScript: scalarBundle,
      docsCsp: DOCS_CSP
    })
    const app = yield* HttpApiBuilder.httpApp
    const counted = withMetrics(
      endpoints.map((e) => e.template),
      systemPaths(API_PREFIX)
    )
    return HttpServer.serve(counted(withRequestId(guardRequests(system(closeUnreadUploads(Api)(app))))))
  })
).pipe(
  withoutSystemTraces(systemPaths(API_PREFIX)),
  Layer.provide(errorEnvelopeLive(allowedMethods)),
  // A path is what it says: case-sensitive, no trailing or doubled slash taken as another.
  Layer.provide(
    HttpRouter.setRouterConfig({ caseSensitive: true, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false })
  ),
  Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer]),
  Layer.provide(ApiLive),
  Layer.provide(Repositories)
)

/** The API on its own port (API_PORT); the composition root provides the analytics store. */
export const ApiServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    ApiHttpLive.pipe(
      HttpServer.withLogAddress,
      Layer.provide(
        nodeServerLayer({ port: config.apiPort, allowedMethods }).pipe(
          Layer.catchAll((e) => Layer.fail(e._tag === "ServeError" ? listenFailed("API_PORT", config.apiPort)(e) : e))
        )
      )
    )
  )
)
