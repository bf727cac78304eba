import { Schema } from "effect"

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
export const isImageId = (s: string): boolean => IMAGE_ID_PATTERN.test(s)
/** An image id of IMAGE_ID_PATTERN, branded (not used by the images code yet). */
export const ImageId = Schema.String.pipe(Schema.pattern(IMAGE_ID_PATTERN), Schema.brand("ImageId"))
export type ImageId = typeof ImageId.Type

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

/** The stored state of an image: what the repositories read and write. */
export interface ImageRow {
  readonly seq: bigint
  readonly id: string
  readonly accountId: string
  readonly status: ImageStatus
  readonly unmetered: boolean
  readonly requestedRating: CreationRating
  /** The effective rating; the API shows null while processing. */
  readonly rating: Rating
  readonly ratingSource: RatingSource | null
  readonly sourceFormat: string
  readonly sourceBytes: number
  readonly sourceUrl: string | null
  /** The private source in the blob store, while it is kept. */
  readonly sourceKey: string | null
  readonly reservedBytes: number
  readonly mimeType: string | null
  readonly ext: string | null
  readonly blobKey: string | null
  readonly width: number | null
  readonly height: number | null
  readonly frames: number | null
  readonly animated: boolean | null
  readonly bytes: number | null
  readonly failure: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
  readonly deletedAt: Date | null
  /** The latest rating review, if any. */
  readonly review: { readonly requested: DeclaredRating; readonly status: ReviewStatus } | null
}

/** The image's state as every images.v1 event carries it. */
export const imageEventData = (row: ImageRow) => ({
  id: row.id,
  status: row.status,
  content_rating: row.status === "processing" ? null : row.rating,
  rating_source: row.ratingSource,
  mime_type: row.mimeType,
  ext: row.ext,
  width: row.width,
  height: row.height,
  bytes: row.bytes,
  animated: row.animated,
  unmetered: row.unmetered,
  failure: row.failure,
  deleted: row.deletedAt !== null,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

export interface NewImage {
  readonly id: string
  readonly accountId: string
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
  readonly imageId: string
  /** The private source in the blob store; null once purged. */
  readonly sourceKey: string | null
  readonly attempts: number
  readonly tier: "normal" | "fast"
  readonly createdAt: Date
}

/** An owner's request for a less strict rating, decided by an operator. */
export interface RatingReview {
  readonly id: string
  readonly imageId: string
  readonly accountId: string
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
