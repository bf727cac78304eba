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
