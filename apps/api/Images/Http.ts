import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Data, Effect, Either, Option, Schema } from "effect"
import type { Principal } from "../../../domain/Account.js"
import {
  CreationRating,
  type DeclaredRating,
  declarationOutcome,
  extensionOf,
  IMAGE_ID_LENGTH,
  type ImageRow,
  isImageId
} from "../../../domain/Image.js"
import { MAX_IMAGE_BYTES, sniffImageFormat } from "../../../domain/ImageFormat.js"
import { imageUploadQuota, quotaDetail, storageQuota, usagePeriod } from "../../../domain/Plan.js"
import { BlobStore } from "../../../domain/ports/BlobStore.js"
import { Codec, type ImageInfo, type ProbeError } from "../../../domain/ports/Codec.js"
import { ImageJobRepo } from "../../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../../domain/ports/ImageRepo.js"
import { RatingReviewRepo } from "../../../domain/ports/RatingReviewRepo.js"
import { type FetchError, SafeFetcher } from "../../../domain/ports/SafeFetcher.js"
import { StorageRepo } from "../../../domain/ports/StorageRepo.js"
import { UsageRepo } from "../../../domain/ports/UsageRepo.js"
import { AppConfig } from "../../../infra/AppConfig.js"
import { randomBase62 } from "../../../infra/Ids.js"
import { Plans } from "../../../infra/Plans.js"
import { Api } from "../Api.js"
import * as E from "../Errors.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { CurrentUpload } from "../middleware/UploadBody.js"
import { envelope, keysetPage } from "../Shared.js"
import type { Image } from "./Api.js"
import { describeBytes } from "./Upload.js"

/** The storage quota refused the reservation (internal: answered as 403 quota_exceeded). */
class StorageFull extends Data.TaggedError("StorageFull")<{ readonly limit: number }> {}

/** Bound on a URL import's fetch: resolution, every hop and retry. */
const IMPORT_TIMEOUT_MS = 15_000

const isCreationRating = Schema.is(CreationRating)

const shorten = (s: string) => (s.length > 200 ? `${s.slice(0, 200)}…` : s)

/** What the bytes are not, and what they look like when that is known. */
const notAnImageDetail = (bytes: Uint8Array, error: ProbeError) => {
  if (error._tag === "CorruptImage") return `the image is damaged or truncated (${error.message})`
  if (sniffImageFormat(bytes) !== null) return error.message
  const looks = describeBytes(bytes)
  return `the bytes are not a JPEG, PNG, WebP or GIF image${looks === undefined ? "" : `: they are ${looks}`}`
}

export const ImagesHttp = HttpApiBuilder.group(Api, "images", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const images = yield* ImageRepo
    const imageJobs = yield* ImageJobRepo
    const reviews = yield* RatingReviewRepo
    const storage = yield* StorageRepo
    const blobs = yield* BlobStore
    const codec = yield* Codec
    const fetcher = yield* SafeFetcher
    const config = yield* AppConfig
    const plans = yield* Plans
    const usage = yield* UsageRepo

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

    /**
     * The caller's image, or 404: another account's, a deleted one, and an id of a shape no
     * image has (which must not reach SQL) are all no such image.
     */
    const owned = (id: string, forUpdate = false) =>
      Effect.gen(function* () {
        const principal = yield* CurrentPrincipal
        const row = !isImageId(id)
          ? Option.none()
          : yield* forUpdate ? images.findForUpdate(principal.accountId, id) : images.find(principal.accountId, id)
        if (Option.isNone(row)) return yield* E.fail(E.NotFound, "No such image.")
        return row.value
      })

    /**
     * Creates the image in the request's transaction: the monthly upload quota and the
     * storage quota (the source size is reserved until the conversion publishes the real
     * size), a fresh 7-character id, the private source in the blob store (under a random
     * key: it is never served), the conversion job, and image.uploaded. Refused by a quota,
     * nothing of it remains (403, stored for replay). A blob store failure is a defect that the
     * pipeline answers 503, rolling everything back.
     */
    const create = (
      principal: Principal,
      source: {
        readonly bytes: Uint8Array
        readonly info: ImageInfo
        readonly rating: CreationRating
        readonly sourceUrl: string | null
      }
    ) =>
      Effect.gen(function* () {
        const plan = plans.limits(principal.plan)
        const uploadLimit = imageUploadQuota(plan, principal.unmetered)
        const storageLimit = storageQuota(plan, principal.unmetered)
        const size = source.bytes.length
        const sourceKey = `sources/${randomBase62(22)}`
        let sourceWritten = false
        const insert = Effect.gen(function* () {
          const reserved = yield* storage.reserve(principal.accountId, principal.unmetered, size, storageLimit)
          if (Option.isNone(reserved)) return yield* new StorageFull({ limit: storageLimit ?? 0 })
          yield* blobs.put(sourceKey, source.bytes, source.info.mime_type).pipe(Effect.orDie)
          sourceWritten = true
          let row: ImageRow | undefined
          // 62^7 ids: a collision is rare, and each retry draws a fresh random one.
          for (let attempt = 0; attempt < 8 && row === undefined; attempt++) {
            row = Option.getOrUndefined(
              yield* images.insert({
                id: randomBase62(IMAGE_ID_LENGTH),
                accountId: principal.accountId,
                unmetered: principal.unmetered,
                requestedRating: source.rating,
                sourceFormat: source.info.format,
                sourceBytes: size,
                sourceUrl: source.sourceUrl,
                sourceKey,
                mimeType: source.info.mime_type,
                ext: source.info.published
              })
            )
          }
          if (row === undefined) return yield* Effect.dieMessage("could not allocate a free image id")
          yield* imageJobs.insert(row.id)
          yield* images.emit("image.uploaded", row)
          yield* images.auditDeclaration(row, principal.keyId)
          return row
        })
        const period = usagePeriod(new Date())
        // The monthly quota is counted after the insert (serializing the account's uploads for
        // the shortest time); a refusal rolls the insert back and the source goes with it.
        const dropSource = Effect.suspend(() =>
          sourceWritten ? blobs.remove(sourceKey).pipe(Effect.ignore) : Effect.void
        )
        const counted = yield* usage.counted(principal.accountId, period, "image_uploads", uploadLimit, insert).pipe(
          Effect.tap((result) => (Either.isLeft(result) ? dropSource : Effect.void)),
          Effect.onError(() => dropSource),
          Effect.catchTag("StorageFull", (full) =>
            Effect.flatMap(storage.current(principal.accountId), (storage) =>
              E.fail(
                E.QuotaExceeded,
                `The image does not fit in the plan's storage (plan ${principal.plan}).`,
                `${quotaDetail("storage_bytes", storage.ordinary, full.limit)}; this image needs ${size} more`
              )
            )
          )
        )
        if (Either.isLeft(counted)) {
          return yield* E.fail(
            E.QuotaExceeded,
            `The plan's monthly image upload quota is used up (plan ${principal.plan}, ${period} UTC).`,
            quotaDetail("image_uploads_per_month", counted.left, uploadLimit ?? 0)
          )
        }
        return yield* envelope(toApi(counted.right))
      })

    /** The rating asked for at upload: the query parameter or the multipart field (which must agree). */
    const uploadRating = (query: CreationRating | undefined, field: string | undefined) => {
      if (field === undefined) return Effect.succeed(query ?? "auto")
      if (!isCreationRating(field)) {
        return E.fail(
          E.InvalidRequest,
          "The request failed validation.",
          "content_rating: must be auto, general or nsfw"
        )
      }
      if (query !== undefined && query !== field) {
        return E.fail(
          E.InvalidRequest,
          "The request failed validation.",
          "content_rating: the query parameter and the form field disagree"
        )
      }
      return Effect.succeed(field)
    }

    const fetchFailed = (
      error: FetchError
    ): Effect.Effect<
      never,
      | typeof E.UrlNotAllowed.Type
      | typeof E.RedirectNotAllowed.Type
      | typeof E.SourceTooLarge.Type
      | typeof E.SourceForbidden.Type
      | typeof E.SourceUnreachable.Type
    > => {
      switch (error._tag) {
        case "UrlNotAllowed":
          return E.fail(E.UrlNotAllowed, "The URL is not allowed for a server-side fetch.", `url: ${error.reason}`)
        case "RedirectNotAllowed":
          return E.fail(
            E.RedirectNotAllowed,
            "The source redirected where a server-side fetch may not go.",
            `redirect to ${shorten(error.location)}: ${error.reason}`
          )
        case "SourceTooLarge":
          return E.fail(
            E.SourceTooLarge,
            "The source's response is larger than the image file limit.",
            `the response is larger than ${error.limit} bytes`
          )
        case "SourceForbidden":
          return E.fail(
            E.SourceForbidden,
            "The source refused the server-side fetch (403).",
            "the source answered 403 to the server-side fetch: download the file yourself and upload its bytes to POST /images as multipart/form-data (part 'file')"
          )
        case "SourceUnreachable":
          return E.fail(E.SourceUnreachable, "The source gave no usable answer.", error.reason)
        case "SourceRejected":
          return E.fail(E.SourceUnreachable, "The source gave no usable answer.", `the source answered ${error.status}`)
      }
    }

    return withIdempotency(
      operations,
      handlers
        .handle("upload", ({ urlParams }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            const upload = yield* CurrentUpload
            const rating = yield* uploadRating(urlParams.content_rating, upload.contentRating)
            const info = yield* codec
              .probe(upload.bytes)
              .pipe(
                Effect.catchAll((error) =>
                  E.fail(
                    E.UnsupportedMediaType,
                    "The bytes are not a JPEG, PNG, WebP or GIF image.",
                    `${upload.kind === "raw" ? "body" : "file"}: ${notAnImageDetail(upload.bytes, error)}, whatever Content-Type was declared`
                  )
                )
              )
            return yield* create(principal, { bytes: upload.bytes, info, rating, sourceUrl: null })
          })
        )
        .handle("import", ({ payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            // The schema has checked that it parses.
            const url = new URL(payload.url)
            if (url.protocol !== "http:" && url.protocol !== "https:") {
              return yield* E.fail(
                E.UrlNotAllowed,
                "The URL is not allowed for a server-side fetch.",
                `url: scheme ${url.protocol} is not http or https`
              )
            }
            const response = yield* fetcher
              .fetch(payload.url, { maxBytes: MAX_IMAGE_BYTES, accept: "image/*", timeoutMs: IMPORT_TIMEOUT_MS })
              .pipe(Effect.catchAll(fetchFailed))
            if (response.body.length === 0) {
              return yield* E.fail(E.NotAnImage, "The source's response is not an image.", "the response is empty")
            }
            const info = yield* codec.probe(response.body).pipe(
              Effect.catchAll((error) => {
                const type = response.headers["content-type"]
                return E.fail(
                  E.NotAnImage,
                  "The source's response is not an image.",
                  `${notAnImageDetail(response.body, error)}${type === undefined ? "" : ` (Content-Type ${shorten(type)})`}; give the URL of the image file itself`
                )
              })
            )
            return yield* create(principal, {
              bytes: response.body,
              info,
              rating: payload.content_rating ?? "auto",
              sourceUrl: payload.url
            })
          })
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (principal) =>
            keysetPage(
              urlParams,
              (afterSeq: bigint | undefined, limit: number) => images.search(principal.accountId, { afterSeq, limit }),
              toApi
            )
          )
        )
        .handle("get", ({ path }) => Effect.flatMap(owned(path.id), (row) => envelope(toApi(row))))
        .handle("rate", ({ path, payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            const row = yield* owned(path.id, true)
            if (row.status === "failed") {
              return yield* E.fail(
                E.ImageFailed,
                "The image's conversion failed; it cannot be rated.",
                `failure: ${row.failure ?? "unknown"}`
              )
            }
            const requested: DeclaredRating = payload.content_rating
            // The effective rating decides, also while processing (an owner declaration made at
            // upload is already effective; `unrated` counts as nsfw).
            if (declarationOutcome(row.rating, requested) === "apply") {
              yield* reviews.closePending(row.id)
              yield* images.rate(row, requested, "owner", principal.keyId)
              const rated = yield* owned(row.id)
              return yield* envelope(toApi(rated))
            }
            const reviewed = yield* reviews.request(row, requested)
            return HttpServerResponse.unsafeJson(yield* envelope(toApi(reviewed)), { status: 202 })
          })
        )
        .handle("delete", ({ path }) =>
          Effect.gen(function* () {
            const row = yield* owned(path.id, true)
            const deleted = yield* images.softDelete(row)
            return yield* envelope(toApi(deleted))
          })
        )
    )
  })
)
