import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  CreationRating,
  DeclaredRating,
  extensionOf,
  type Image as ImageModel,
  ImageStatus,
  RatingSource,
  ReviewStatus
} from "../../../domain/Image.js"
import { ACCEPTED_CONTENT_TYPES, MAX_IMAGE_BYTES } from "../../../domain/ImageFormat.js"
import * as E from "../Errors.js"
import { Authentication } from "../middleware/Authentication.js"
import { IdempotencyKey, OutboundFetch } from "../middleware/Idempotency.js"
import { JsonBody } from "../middleware/JsonBody.js"
import { RequiredScope } from "../middleware/Scopes.js"
import { MULTIPART_OVERHEAD } from "../middleware/Upload.js"
import { UploadBody } from "../middleware/UploadBody.js"
import { Cursor, Envelope, IdPath, Limit, optional, Page } from "../Shared.js"

const nullable = <S extends Schema.Schema.Any>(schema: S, description: string) =>
  Schema.NullOr(schema).annotations({ description })

const DateTime = Schema.String.annotations({ jsonSchema: { type: "string", format: "date-time" } })

export const Image = Schema.Struct({
  id: Schema.String.annotations({
    description: "Image identifier. New ids are 7 characters long; existing longer ids stay valid."
  }),
  status: ImageStatus,
  status_url: Schema.String.annotations({
    description: "{base_url}/images/{id}: poll it after creation until `status` is `ready` (or `failed`).",
    jsonSchema: {
      type: "string",
      format: "uri",
      description: "{base_url}/images/{id}: poll it after creation until `status` is `ready` (or `failed`)."
    }
  }),
  url: Schema.String.annotations({
    description:
      "{image_host}/{id}.{ext}: the immutable direct image address for embedding, readable with GET or HEAD without a key. Use it as given, together with `mime_type`; never build a file extension yourself.",
    jsonSchema: {
      type: "string",
      format: "uri",
      description:
        "{image_host}/{id}.{ext}: the immutable direct image address for embedding, readable with GET or HEAD without a key. Use it as given, together with `mime_type`; never build a file extension yourself."
    }
  }),
  share_url: Schema.String.annotations({
    description:
      "{image_host}/v/{id}: a session-neutral viewer page that shows the image with its rating context and a report action.",
    jsonSchema: {
      type: "string",
      format: "uri",
      description:
        "{image_host}/v/{id}: a session-neutral viewer page that shows the image with its rating context and a report action."
    }
  }),
  mime_type: Schema.String.annotations({
    description:
      "Media type of the delivered image: image/webp for new uploads, image/gif for a large animation kept as GIF. Known from the 202 on."
  }),
  content_rating: Schema.NullOr(Schema.Literal("general", "sensitive", "nsfw", "unrated")).annotations({
    description:
      "null while `processing`; then the effective rating. `unrated` means classification is pending or gave no usable result: it never means safe, treat it as cautiously as `nsfw`."
  }),
  rating_source: nullable(
    RatingSource,
    "Who set the effective rating: `owner` (a declaration), `classifier` or `operator` (an approved review); null while processing or unrated."
  ),
  rating_review: Schema.NullOr(
    Schema.Struct({
      requested: DeclaredRating,
      status: ReviewStatus
    }).annotations({ identifier: "RatingReview" })
  ).annotations({
    description:
      "The latest owner request for a less strict rating, which waits for operator review (`pending`, then `approved` or `rejected`); null when there was none."
  }),
  width: nullable(Schema.Int, "Pixels of the delivered image; null until ready."),
  height: nullable(Schema.Int, "Pixels of the delivered image; null until ready."),
  bytes: nullable(Schema.Int, "Size of the delivered image; null until ready."),
  animated: nullable(Schema.Boolean, "Whether the delivered image has more than one frame; null until ready."),
  failure: nullable(Schema.String, "Why the conversion failed for good (status `failed`); null otherwise."),
  created_at: DateTime
}).annotations({ identifier: "Image" })
export type Image = typeof Image.Type

/**
 * The API record of an image: the model under the contract's names, with its addresses
 * (`apiBase` for status_url, `imageHost` for url and share_url). What only a ready image has
 * is null before; the rating and its source show once processing is over.
 */
export const toApiImage =
  (hosts: { readonly apiBase: string; readonly imageHost: string }) =>
  (image: ImageModel): Image => {
    const mimeType = image.mimeType ?? "image/webp"
    const ext = image.ext ?? extensionOf(mimeType)
    const processing = image.status === "processing"
    const ready = image.status === "ready"
    const rated = !processing && image.rating !== "unrated"
    return {
      id: image.id,
      status: image.status,
      status_url: `${hosts.apiBase}/images/${image.id}`,
      url: `${hosts.imageHost}/${image.id}.${ext}`,
      share_url: `${hosts.imageHost}/v/${image.id}`,
      mime_type: mimeType,
      content_rating: processing ? null : image.rating,
      rating_source: rated ? image.ratingSource : null,
      rating_review: image.review === null ? null : { requested: image.review.requested, status: image.review.status },
      width: ready ? image.width : null,
      height: ready ? image.height : null,
      bytes: ready ? image.bytes : null,
      animated: ready ? image.animated : null,
      failure: image.status === "failed" ? image.failure : null,
      created_at: image.createdAt.toISOString()
    }
  }

const contentRatingParam = CreationRating.annotations({
  description:
    "auto (default) runs the classifier; general and nsfw are owner declarations (audited) that skip it. A multipart body may send it as the form field `content_rating` instead."
})

export const UploadParams = Schema.Struct({ content_rating: optional(contentRatingParam) })

const IMPORT_URL_DESCRIPTION =
  "A public http(s) URL that directly returns the image bytes (JPEG, PNG, WebP or GIF, at most 10485760 bytes), not a page that shows the image. At most 3 redirects, each checked like the URL itself."

export const ImportImage = Schema.Struct({
  url: Schema.String.pipe(
    Schema.maxLength(2048, { message: () => "must be at most 2048 characters" }),
    Schema.filter((s) => URL.canParse(s) || "must be an absolute URL (http or https)")
  ).annotations({
    description: IMPORT_URL_DESCRIPTION,
    jsonSchema: { type: "string", format: "uri", maxLength: 2048, description: IMPORT_URL_DESCRIPTION }
  }),
  content_rating: optional(
    CreationRating.annotations({
      description: "auto (default) runs the classifier; general and nsfw are owner declarations that skip it."
    })
  )
}).annotations({ identifier: "ImportImage", parseOptions: { onExcessProperty: "error", errors: "all" } })

export const RateImage = Schema.Struct({
  content_rating: DeclaredRating.annotations({
    description:
      "The owner's declaration. As strict as the effective rating or stricter (general < sensitive < nsfw; unrated counts as nsfw) applies at once: 200. Less strict waits for operator review: 202, with the effective rating unchanged and `rating_review.status` `pending`."
  })
}).annotations({ identifier: "RateImage", parseOptions: { onExcessProperty: "error", errors: "all" } })

export const ListImagesParams = Schema.Struct({
  cursor: optional(Cursor),
  limit: optional(Limit)
})

const binary = { schema: { type: "string", format: "binary" } }

/** The upload body as the OpenAPI document shows it: the UploadBody middleware reads it (middleware/Upload.ts). */
const uploadRequestBody = {
  required: true,
  description: `The image file, at most ${MAX_IMAGE_BYTES} bytes: raw bytes with the image's Content-Type, or multipart/form-data with a binary part \`file\` (the body may carry at most ${MULTIPART_OVERHEAD} bytes of form data besides). The bytes decide what the image is: bytes that are not a JPEG, PNG, WebP or GIF are 415 whatever type was declared.`,
  // Multipart first: a generator that types one body per operation (@hey-api/openapi-ts) takes the first.
  content: {
    "multipart/form-data": {
      schema: {
        type: "object",
        required: ["file"],
        properties: {
          file: { type: "string", format: "binary", description: "The image file." },
          content_rating: {
            type: "string",
            enum: ["auto", "general", "nsfw"],
            description: "Instead of the query parameter (both given must agree)."
          }
        }
      },
      encoding: { file: { contentType: ACCEPTED_CONTENT_TYPES.join(", ") } }
    },
    ...Object.fromEntries(ACCEPTED_CONTENT_TYPES.map((type) => [type, binary]))
  }
}

const scope = RequiredScope

export class ImagesApi extends HttpApiGroup.make("images")
  .add(
    HttpApiEndpoint.post("upload", "/images")
      .setUrlParams(UploadParams)
      .addSuccess(Envelope(Image), { status: 202 })
      // UploadBody reads the body (middleware/Upload.ts): 400 empty or malformed, 413, 415.
      .middleware(UploadBody)
      .addError(E.InvalidRequest)
      .addError(E.UnsupportedMediaType)
      .addError(E.PayloadTooLarge)
      .addError(E.QuotaExceeded)
      .annotate(scope, "images:write")
      .annotate(OpenApi.Summary, "Upload an image (raw bytes or multipart); it is normalized asynchronously")
      .annotate(
        OpenApi.Description,
        "202: poll `status_url` until `status` is `ready`. A client-side polling timeout is not an upload failure: keep polling, do not upload again. Counts against the plan's monthly image uploads and storage (pending uploads included); Unmetered Partner Keys skip both."
      )
      .annotate(OpenApi.Override, { requestBody: uploadRequestBody })
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.post("import", "/images/url")
      .setPayload(ImportImage)
      .addSuccess(Envelope(Image), { status: 202 })
      .addError(E.QuotaExceeded)
      .addError(E.UrlNotAllowed)
      .addError(E.RedirectNotAllowed)
      .addError(E.NotAnImage)
      .addError(E.SourceTooLarge)
      .addError(E.SourceForbidden)
      .addError(E.SourceUnreachable)
      .annotate(OutboundFetch, true)
      .annotate(scope, "images:write")
      .annotate(OpenApi.Summary, "Import an image from a public URL; it is normalized asynchronously")
      .annotate(
        OpenApi.Description,
        "The service fetches the URL itself (http or https, public addresses only, at most 3 redirects, 15 s, 10485760 bytes) and accepts only a response whose bytes are a JPEG, PNG, WebP or GIF image: a post or an HTML share page is 422 not_an_image. When the source answers 403 (422 source_forbidden), download the file yourself and upload it to POST /images as multipart/form-data. 202: poll `status_url`."
      )
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.get("list", "/images")
      .setUrlParams(ListImagesParams)
      .addSuccess(Page(Image))
      .addError(E.InvalidRequest)
      .annotate(scope, "images:read")
      .annotate(OpenApi.Summary, "List hosted images, newest first (deleted ones are gone)")
  )
  .add(
    HttpApiEndpoint.get("get", "/images/:id")
      .setPath(IdPath)
      .addSuccess(Envelope(Image))
      .addError(E.NotFound)
      .annotate(scope, "images:read")
      .annotate(OpenApi.Summary, "Read an image: processing, delivery and rating state")
  )
  .add(
    HttpApiEndpoint.patch("rate", "/images/:id/rating")
      .setPath(IdPath)
      .setPayload(RateImage)
      .addSuccess(Envelope(Image).annotations({ description: "The declaration applies: the image with it." }))
      .addSuccess(
        Envelope(Image).annotations({
          description:
            "The declaration is less strict than the effective rating: recorded for operator review, the effective rating unchanged, `rating_review.status` `pending`."
        }),
        { status: 202 }
      )
      .addError(E.NotFound)
      .addError(E.ImageFailed)
      .annotate(scope, "images:write")
      .annotate(OpenApi.Summary, "Declare an image's content rating")
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.del("delete", "/images/:id")
      .setPath(IdPath)
      .addSuccess(Envelope(Image).annotations({ description: "The image as it was when deleted." }))
      .addError(E.NotFound)
      .annotate(scope, "images:write")
      .annotate(
        OpenApi.Summary,
        "Delete an image: it leaves lists, its URL answers 404 and its storage is freed at once"
      )
      .middleware(IdempotencyKey)
  )
  .middlewareEndpoints(Authentication) {}
