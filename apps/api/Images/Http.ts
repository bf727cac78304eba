import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import type { Image } from "../../../domain/Image.js"
import { AppConfig } from "../../../infra/AppConfig.js"
import { Api } from "../Api.js"
import { mapDomainErrors } from "../DomainAnswers.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { CurrentUpload } from "../middleware/UploadBody.js"
import { envelope, keysetPage } from "../Shared.js"
import { toApiImage } from "./Api.js"
import { Images } from "./Images.js"

export const ImagesHttp = HttpApiBuilder.group(Api, "images", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const images = yield* Images
    const config = yield* AppConfig

    const toApi = toApiImage(config)
    const respond = (image: Image) => envelope(toApi(image))

    return withIdempotency(
      operations,
      handlers
        .handle("upload", ({ urlParams }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            const upload = yield* CurrentUpload
            return yield* respond(yield* images.upload(principal, upload, urlParams.content_rating))
          }).pipe(mapDomainErrors)
        )
        .handle("import", ({ payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            return yield* respond(yield* images.importUrl(principal, payload.url, payload.content_rating))
          }).pipe(mapDomainErrors)
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (principal) =>
            keysetPage(
              urlParams,
              (afterSeq: bigint | undefined, limit: number) => images.list(principal, { afterSeq, limit }),
              toApi
            )
          )
        )
        .handle("get", ({ path }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            return yield* respond(yield* images.get(principal, path.id))
          }).pipe(mapDomainErrors)
        )
        .handle("rate", ({ path, payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            const declared = yield* images.rate(principal, path.id, payload.content_rating)
            const body = yield* respond(declared.image)
            // A declaration that waits for review is 202; the success schemas tell them apart only by status.
            return declared.outcome === "applied" ? body : HttpServerResponse.unsafeJson(body, { status: 202 })
          }).pipe(mapDomainErrors)
        )
        .handle("delete", ({ path }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            return yield* respond(yield* images.delete(principal, path.id))
          }).pipe(mapDomainErrors)
        )
    )
  })
)
