import { Schema } from "effect"
import { AccountId } from "./Account.js"

/**
 * Hosted images: ids, states and the rating rules (contract "Hosted Image", DESIGN.md
 * "Image record" and the rating answers). Pure: no codec, no storage.
 */

/** New image ids: 7 base62 characters from the CSPRNG, collision-checked on insert. */
export const IMAGE_ID_LENGTH = 7
/**
 * Any id the routes and the id column accept: new 7-character ids and longer existing ones
 * (legacy ids may carry `_` or `-`). Anything else names no image and never reaches SQL.
 */
export const IMAGE_ID_PATTERN = /^[A-Za-z0-9_-]{7,64}$/
/** An image id of IMAGE_ID_PATTERN, branded. */
export const ImageId = Schema.String.pipe(Schema.pattern(IMAGE_ID_PATTERN), Schema.brand("ImageId"))
export type ImageId = typeof ImageId.Type
export const isImageId = (s: string): s is ImageId => IMAGE_ID_PATTERN.test(s)

export const ImageStatus = Schema.Literal("processing", "ready", "failed").annotations({
  description:
    "`processing` until the conversion finishes, then `ready`; `failed` when the conversion failed for good (`failure` says why)."
})
export type ImageStatus = typeof ImageStatus.Type

/** Ratings a ready image can show. */
export const Rating = Schema.Literal("general", "sensitive", "nsfw", "unrated")
export type Rating = typeof Rating.Type

/** Ratings an owner or a classifier can give (everything but `unrated`). */
export const DeclaredRating = Schema.Literal("general", "sensitive", "nsfw")
export type DeclaredRating = typeof DeclaredRating.Type

/** What an upload or URL import may ask for: run the classifier, or declare. */
export const CreationRating = Schema.Literal("auto", "general", "nsfw")
export type CreationRating = typeof CreationRating.Type

export const RatingSource = Schema.Literal("owner", "classifier", "operator")
export type RatingSource = typeof RatingSource.Type

export const ReviewStatus = Schema.Literal("pending", "approved", "rejected")
export type ReviewStatus = typeof ReviewStatus.Type

/**
 * Strictness: general < sensitive < nsfw, and `unrated` counts as nsfw (contract: clients
 * treat it as cautiously as nsfw). A processing image has no rating yet: as strict as nsfw.
 */
export const strictness = (rating: Rating | null): number => {
  switch (rating) {
    case "general":
      return 0
    case "sensitive":
      return 1
    default:
      return 2
  }
}

/**
 * An owner's declaration against the effective rating: as strict or stricter applies at
 * once; less strict waits for operator review and changes nothing meanwhile.
 */
export const declarationOutcome = (effective: Rating | null, requested: DeclaredRating): "apply" | "review" =>
  strictness(requested) >= strictness(effective) ? "apply" : "review"

/**
 * Private sources of a job whose conversion keeps failing temporarily are kept this long
 * (contract: up to 24 hours), then purged and the image fails for good.
 */
export const SOURCE_RETENTION_MS = 24 * 60 * 60 * 1000

/** Delivery file extension of a published media type (legacy records keep theirs). */
export const extensionOf = (mimeType: string): string => {
  switch (mimeType) {
    case "image/webp":
      return "webp"
    case "image/gif":
      return "gif"
    case "image/png":
      return "png"
    case "image/jpeg":
      return "jpg"
    default:
      return "bin"
  }
}

/** The latest rating review of an image, if any. */
export const ImageReview = Schema.Struct({ requested: DeclaredRating, status: ReviewStatus })

/**
 * A hosted image's stored state: the one model. The API record, the row mapping and the
 * event payload derive from it.
 */
export class Image extends Schema.Class<Image>("Image")({
  id: ImageId,
  accountId: AccountId,
  status: ImageStatus,
  unmetered: Schema.Boolean,
  requestedRating: CreationRating,
  /** The effective rating; the API shows null while processing. */
  rating: Rating,
  ratingSource: Schema.NullOr(RatingSource),
  sourceFormat: Schema.String,
  sourceBytes: Schema.Number,
  sourceUrl: Schema.NullOr(Schema.String),
  /** The private source in the blob store, while it is kept. */
  sourceKey: Schema.NullOr(Schema.String),
  reservedBytes: Schema.Number,
  mimeType: Schema.NullOr(Schema.String),
  ext: Schema.NullOr(Schema.String),
  blobKey: Schema.NullOr(Schema.String),
  width: Schema.NullOr(Schema.Number),
  height: Schema.NullOr(Schema.Number),
  frames: Schema.NullOr(Schema.Number),
  animated: Schema.NullOr(Schema.Boolean),
  bytes: Schema.NullOr(Schema.Number),
  failure: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf,
  deletedAt: Schema.NullOr(Schema.DateFromSelf),
  /** The latest rating review, if any. */
  review: Schema.NullOr(ImageReview)
}) {}

/** An image with its keyset position (`seq`: insertion order), where paging needs it. */
export class ImageRecord extends Image.extend<ImageRecord>("ImageRecord")({ seq: Schema.BigIntFromSelf }) {}

export interface NewImage {
  readonly id: ImageId
  readonly accountId: AccountId
  readonly unmetered: boolean
  readonly requestedRating: CreationRating
  readonly sourceFormat: string
  readonly sourceBytes: number
  readonly sourceUrl: string | null
  /** Where the caller put the private source in the blob store (none: no conversion job). */
  readonly sourceKey?: string | null
  /**
   * What the conversion will publish, known from the probe (domain/ImageFormat
   * publishedFormat): so `url` and `mime_type` are final from the 202 on.
   */
  readonly mimeType: string
  readonly ext: string
}

/** What a conversion published. */
export interface Published {
  readonly mimeType: string
  readonly ext: string
  readonly blobKey: string
  readonly width: number
  readonly height: number
  readonly frames: number
  readonly animated: boolean
  readonly bytes: number
}

/** One image's delivery state, as the image host reads it per request. */
export interface ImageDelivery {
  readonly status: ImageStatus
  readonly rating: Rating
  readonly ext: string | null
  readonly mime_type: string | null
  readonly blob_key: string | null
  readonly deleted: boolean
}

/** The conversion job of a processing image. */
export interface ImageJob {
  readonly imageId: ImageId
  /** The private source in the blob store; null once purged. */
  readonly sourceKey: string | null
  readonly attempts: number
  readonly tier: "normal" | "fast"
  readonly createdAt: Date
}

/** A rating review's id: `rev_` and base62 characters (22 issued), up to 64 like a link id. */
export const RatingReviewId = Schema.String.pipe(
  Schema.pattern(/^rev_[0-9A-Za-z]{1,64}$/),
  Schema.brand("RatingReviewId")
)
export type RatingReviewId = typeof RatingReviewId.Type

/** Whether a text is shaped like a review id (anything else names no review and must not reach SQL). */
export const isRatingReviewId = Schema.is(RatingReviewId)

/** An owner's request for a less strict rating, decided by an operator. */
export interface RatingReview {
  readonly id: RatingReviewId
  readonly imageId: ImageId
  readonly accountId: AccountId
  readonly requested: DeclaredRating
  readonly currentRating: string
  readonly status: ReviewStatus
  readonly createdAt: Date
  readonly decidedAt: Date | null
}

/** A report filed from an image's share page. */
export interface AbuseReport {
  readonly id: string
  readonly image_id: string
  readonly reason: string
  readonly created_at: Date
}

/** Stored bytes (reservations included) of an account's ordinary and Partner (unmetered) images. */
export interface StorageUsage {
  readonly ordinary: number
  readonly unmetered: number
}
