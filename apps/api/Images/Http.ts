import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { extensionOf, type ImageRow } from "../../../domain/Image.js"
import { AppConfig } from "../../../infra/AppConfig.js"
import { Api } from "../Api.js"
import * as E from "../Errors.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { CurrentUpload } from "../middleware/UploadBody.js"
import { envelope, keysetPage } from "../Shared.js"
import type { Image } from "./Api.js"
import { Images } from "./Images.js"

export const ImagesHttp = HttpApiBuilder.group(Api, "images", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const images = yield* Images
    const config = yield* AppConfig

    const toApi = (row: ImageRow): Image => {
      const mimeType = row.mimeType ?? "image/webp"
      const ext = row.ext ?? extensionOf(mimeType)
      const processing = row.status === "processing"
      const rated = !processing && row.rating !== "unrated"
      return {
        id: row.id,
        status: row.status,
        status_url: `${config.apiBase}/images/${row.id}`,
        url: `${config.imageHost}/${row.id}.${ext}`,
        share_url: `${config.imageHost}/v/${row.id}`,
        mime_type: mimeType,
        content_rating: processing ? null : row.rating,
        rating_source: rated ? row.ratingSource : null,
        rating_review: row.review === null ? null : { requested: row.review.requested, status: row.review.status },
        width: row.status === "ready" ? row.width : null,
        height: row.status === "ready" ? row.height : null,
        bytes: row.status === "ready" ? row.bytes : null,
        animated: row.status === "ready" ? row.animated : null,
        failure: row.status === "failed" ? row.failure : null,
        created_at: row.createdAt.toISOString()
      }
    }
    const respond = (row: ImageRow) => envelope(toApi(row))

    return withIdempotency(
      operations,
      handlers
        .handle("upload", ({ urlParams }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            const upload = yield* CurrentUpload
            return yield* respond(yield* images.upload(principal, upload, urlParams.content_rating))
          }).pipe(E.mapDomainErrors)
        )
        .handle("import", ({ payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            return yield* respond(yield* images.importUrl(principal, payload.url, payload.content_rating))
          }).pipe(E.mapDomainErrors)
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
          }).pipe(E.mapDomainErrors)
        )
        .handle("rate", ({ path, payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            const declared = yield* images.rate(principal, path.id, payload.content_rating)
            const body = yield* respond(declared.image)
            // A declaration that waits for review is 202; the success schemas tell them apart only by status.
            return declared.outcome === "applied" ? body : HttpServerResponse.unsafeJson(body, { status: 202 })
          }).pipe(E.mapDomainErrors)
        )
        .handle("delete", ({ path }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            return yield* respond(yield* images.delete(principal, path.id))
          }).pipe(E.mapDomainErrors)
        )
    )
  })
)
