import { Data, Effect, Either, Option, Schema } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { InvalidInput, QuotaExceeded, SourceFailed, UnsupportedContent, UrlNotAllowed } from "../../../domain/Errors.js"
import { CreationRating, IMAGE_ID_LENGTH, ImageId } from "../../../domain/Image.js"
import { MAX_IMAGE_BYTES, sniffImageFormat } from "../../../domain/ImageFormat.js"
import { imageUploadQuota, quotaDetail, storageQuota, usagePeriod } from "../../../domain/Plan.js"
import { BlobStore } from "../../../domain/ports/BlobStore.js"
import { Codec, type ImageInfo, type ProbeError } from "../../../domain/ports/Codec.js"
import { ImageJobRepo } from "../../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../../domain/ports/ImageRepo.js"
import type { FetchError } from "../../../domain/ports/SafeFetcher.js"
import { SafeFetcher } from "../../../domain/ports/SafeFetcher.js"
import { StorageRepo } from "../../../domain/ports/StorageRepo.js"
import { UsageRepo } from "../../../domain/ports/UsageRepo.js"
import { firstFree, randomBase62 } from "../../../infra/Ids.js"
import { Plans } from "../../../infra/Plans.js"
import { describeBytes, type Upload } from "../middleware/Upload.js"

/**
 * How a hosted image comes in: an upload's bytes or a URL import's response, checked to be
 * an image, then created under the plan's quotas. Part of the `Images` service (Images.ts).
 */

/** Bound on a URL import's fetch: resolution, every hop and retry. */
export const IMPORT_TIMEOUT_MS = 15_000

/** The storage quota refused the reservation (internal: answered as QuotaExceeded). */
class StorageFull extends Data.TaggedError("StorageFull")<{ readonly limit: number }> {}

const isCreationRating = Schema.is(CreationRating)

const shorten = (s: string) => (s.length > 200 ? `${s.slice(0, 200)}…` : s)

/**
 * The rating asked for at upload: the query parameter or the multipart field, which must be
 * a creation rating and, when both are sent, agree. Neither: `auto`.
 */
export const declaredCreationRating = (
  query: CreationRating | undefined,
  field: string | undefined
): Either.Either<CreationRating, InvalidInput> => {
  if (field === undefined) return Either.right(query ?? "auto")
  if (!isCreationRating(field)) {
    return Either.left(
      new InvalidInput({
        message: "The request failed validation.",
        detail: "content_rating: must be auto, general or nsfw"
      })
    )
  }
  if (query !== undefined && query !== field) {
    return Either.left(
      new InvalidInput({
        message: "The request failed validation.",
        detail: "content_rating: the query parameter and the form field disagree"
      })
    )
  }
  return Either.right(field)
}

/** What the bytes are not, and what they look like when that is known. */
export const notAnImageDetail = (bytes: Uint8Array, error: ProbeError): string => {
  if (error._tag === "CorruptImage") return `the image is damaged or truncated (${error.message})`
  if (sniffImageFormat(bytes) !== null) return error.message
  const looks = describeBytes(bytes)
  return `the bytes are not a JPEG, PNG, WebP or GIF image${looks === undefined ? "" : `: they are ${looks}`}`
}

/** Uploaded bytes that are no supported image, whatever type the request declared. */
const unsupportedUpload = (upload: Upload, error: ProbeError) =>
  new UnsupportedContent({
    message: "The bytes are not a JPEG, PNG, WebP or GIF image.",
    detail: `${upload.kind === "raw" ? "body" : "file"}: ${notAnImageDetail(upload.bytes, error)}, whatever Content-Type was declared`
  })

/** Only http and https URLs are fetched (the schema has checked that the URL parses). */
export const fetchableUrl = (url: string): Either.Either<URL, UrlNotAllowed> => {
  const parsed = new URL(url)
  return parsed.protocol === "http:" || parsed.protocol === "https:"
    ? Either.right(parsed)
    : Either.left(
        new UrlNotAllowed({
          message: "The URL is not allowed for a server-side fetch.",
          reason: `url: scheme ${parsed.protocol} is not http or https`
        })
      )
}

/** A URL import's failed fetch, as the domain says it. */
export const fetchFailure = (error: FetchError): UrlNotAllowed | SourceFailed => {
  switch (error._tag) {
    case "UrlNotAllowed":
      return new UrlNotAllowed({
        message: "The URL is not allowed for a server-side fetch.",
        reason: `url: ${error.reason}`
      })
    case "RedirectNotAllowed":
      return new SourceFailed({
        kind: "redirect_not_allowed",
        message: "The source redirected where a server-side fetch may not go.",
        detail: `redirect to ${shorten(error.location)}: ${error.reason}`
      })
    case "SourceTooLarge":
      return new SourceFailed({
        kind: "source_too_large",
        message: "The source's response is larger than the image file limit.",
        detail: `the response is larger than ${error.limit} bytes`
      })
    case "SourceForbidden":
      return new SourceFailed({
        kind: "source_forbidden",
        message: "The source refused the server-side fetch (403).",
        detail:
          "the source answered 403 to the server-side fetch: download the file yourself and upload its bytes to POST /images as multipart/form-data (part 'file')"
      })
    case "SourceUnreachable":
      return new SourceFailed({
        kind: "source_unreachable",
        message: "The source gave no usable answer.",
        detail: error.reason
      })
    case "SourceRejected":
      return new SourceFailed({
        kind: "source_unreachable",
        message: "The source gave no usable answer.",
        detail: `the source answered ${error.status}`
      })
  }
}

/** A fetched response that is no image: empty, or bytes the codec does not take. */
const notAnImageResponse = (detail: string) =>
  new SourceFailed({ kind: "not_an_image", message: "The source's response is not an image.", detail })

const sourceNotAnImage = (body: Uint8Array, contentType: string | undefined, error: ProbeError) =>
  notAnImageResponse(
    `${notAnImageDetail(body, error)}${contentType === undefined ? "" : ` (Content-Type ${shorten(contentType)})`}; give the URL of the image file itself`
  )

/** What a new image is made from. */
interface Source {
  readonly bytes: Uint8Array
  readonly info: ImageInfo
  readonly rating: CreationRating
  readonly sourceUrl: string | null
}

/** Creating an image from a checked source, under the plan's quotas, in the caller's transaction. */
const makeCreate = Effect.gen(function* () {
  const images = yield* ImageRepo
  const imageJobs = yield* ImageJobRepo
  const storage = yield* StorageRepo
  const blobs = yield* BlobStore
  const plans = yield* Plans
  const usage = yield* UsageRepo

  /**
   * Inserts the image under a fresh 7-character id (62^7 ids: a collision is rare, and each
   * retry draws a fresh random one), its conversion job, image.uploaded and the audit of the
   * declaration.
   */
  const insertImage = (principal: Principal, source: Source, sourceKey: string) =>
    Effect.gen(function* () {
      const row = yield* firstFree(
        Effect.suspend(() =>
          images.insert({
            id: ImageId.make(randomBase62(IMAGE_ID_LENGTH)),
            accountId: principal.accountId,
            unmetered: principal.unmetered,
            requestedRating: source.rating,
            sourceFormat: source.info.format,
            sourceBytes: source.bytes.length,
            sourceUrl: source.sourceUrl,
            sourceKey,
            mimeType: source.info.mime_type,
            ext: source.info.published
          })
        ),
        "image id"
      )
      yield* imageJobs.insert(row.id)
      yield* images.emit("image.uploaded", row)
      yield* images.auditDeclaration(row, principal.keyId)
      return row
    })

  /**
   * Creates the image: the monthly upload quota and the storage quota (the source size is
   * reserved until the conversion publishes the real size), the private source in the blob
   * store (under a random key: it is never served), the record and its conversion job.
   * Refused by a quota, nothing of it remains: the caller's transaction rolls the rows back
   * and the source is removed from the blob store. A blob store failure is a defect (the API
   * answers 503 and rolls everything back).
   */
  const create = (principal: Principal, source: Source) =>
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
        return yield* insertImage(principal, source, sourceKey)
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
          Effect.flatMap(storage.current(principal.accountId), (current) =>
            Effect.fail(
              new QuotaExceeded({
                message: `The image does not fit in the plan's storage (plan ${principal.plan}).`,
                detail: `${quotaDetail("storage_bytes", current.ordinary, full.limit)}; this image needs ${size} more`
              })
            )
          )
        )
      )
      if (Either.isLeft(counted)) {
        return yield* new QuotaExceeded({
          message: `The plan's monthly image upload quota is used up (plan ${principal.plan}, ${period} UTC).`,
          detail: quotaDetail("image_uploads_per_month", counted.left, uploadLimit ?? 0)
        })
      }
      return counted.right
    })

  return create
})

/** The upload and URL import use cases. Writes run in the caller's transaction. */
export const makeImageIntake = Effect.gen(function* () {
  const create = yield* makeCreate
  const codec = yield* Codec
  const fetcher = yield* SafeFetcher

  /** An upload: the declared rating, bytes that are a supported image, then the image. */
  const upload = Effect.fn("Images.upload")(function* (
    principal: Principal,
    upload: Upload,
    declared: CreationRating | undefined
  ) {
    const rating = yield* declaredCreationRating(declared, upload.contentRating)
    const info = yield* codec.probe(upload.bytes).pipe(Effect.mapError((error) => unsupportedUpload(upload, error)))
    return yield* create(principal, { bytes: upload.bytes, info, rating, sourceUrl: null })
  })

  /** A URL import: the service fetches the URL itself, and the response must be an image. */
  const importUrl = Effect.fn("Images.importUrl")(function* (
    principal: Principal,
    url: string,
    rating: CreationRating | undefined
  ) {
    yield* fetchableUrl(url)
    const response = yield* fetcher
      .fetch(url, { maxBytes: MAX_IMAGE_BYTES, accept: "image/*", timeoutMs: IMPORT_TIMEOUT_MS })
      .pipe(Effect.mapError(fetchFailure))
    if (response.body.length === 0) return yield* notAnImageResponse("the response is empty")
    const info = yield* codec
      .probe(response.body)
      .pipe(Effect.mapError((error) => sourceNotAnImage(response.body, response.headers["content-type"], error)))
    return yield* create(principal, { bytes: response.body, info, rating: rating ?? "auto", sourceUrl: url })
  })

  return { upload, importUrl } as const
})
