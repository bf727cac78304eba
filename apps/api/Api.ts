import { HttpApi, OpenApi } from "@effect/platform"
import { AnalyticsApi } from "./Analytics/Api.js"
import * as E from "./Errors.js"
import { ImagesApi } from "./Images/Api.js"
import { LinksApi } from "./Links/Api.js"
import { UsageApi } from "./Usage/Api.js"
import { UtmPresetsApi } from "./UtmPresets/Api.js"

export class Api extends HttpApi.make("v1")
  .add(LinksApi)
  .add(UtmPresetsApi)
  .add(AnalyticsApi)
  .add(ImagesApi)
  .add(UsageApi)
  .addError(E.Unauthenticated)
  .addError(E.ApiScopeRequired)
  .addError(E.RateLimited)
  .addError(E.InternalError)
  .addError(E.DependencyUnavailable)
  .prefix("/v1")
  .annotate(OpenApi.Title, "Link Shortening and Hosted Image Service API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "Short links, QR codes, analytics and hosted images. Every request sends `Authorization: Bearer <API_KEY>`; every POST, PATCH and DELETE sends an `Idempotency-Key` header of 8 to 128 characters."
  ) {}
