import { Schema } from "effect"
import { envelope } from "./EventEnvelope.js"
import { DeclaredRating, ImageStatus, Rating, RatingSource } from "./Image.js"

export const ImageEventData = Schema.Struct({
  id: Schema.String.annotations({ description: "Image id; also the message key." }),
  status: ImageStatus,
  content_rating: Schema.NullOr(Rating).annotations({
    description: "The effective rating; null while processing."
  }),
  rating_source: Schema.NullOr(RatingSource),
  mime_type: Schema.NullOr(Schema.String).annotations({
    description: "Media type of the published bytes; null until ready."
  }),
  ext: Schema.NullOr(Schema.String).annotations({
    description: "File extension of the delivery URL ({image_host}/{id}.{ext}); null until ready."
  }),
  width: Schema.NullOr(Schema.Number),
  height: Schema.NullOr(Schema.Number),
  bytes: Schema.NullOr(Schema.Number).annotations({ description: "Size of the published bytes." }),
  animated: Schema.NullOr(Schema.Boolean),
  unmetered: Schema.Boolean.annotations({ description: "Uploaded with an Unmetered Partner Key." }),
  failure: Schema.NullOr(Schema.String).annotations({ description: "Why the conversion failed for good." }),
  deleted: Schema.Boolean,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "ImageState", description: "The image's whole state after the change." })

export const RatingChange = Schema.Struct({
  from: Schema.NullOr(Rating),
  to: Rating,
  source: RatingSource,
  actor: Schema.String.annotations({
    description: "Who: the API key id for an owner, `classifier:<name>`, or `operator` for a review decision."
  })
}).annotations({ identifier: "RatingChange" })

export const ImageUploaded = envelope("image.uploaded", ImageEventData).annotations({
  description:
    "An image was accepted for normalization (POST /images, POST /images/url); the conversion worker consumes it."
})
export const ImageConversionRetry = envelope("image.conversion_retry", ImageEventData).annotations({
  description: "A conversion failed temporarily; it is retried under a durable lease with the fast encoding tier."
})
export const ImageConverted = envelope("image.converted", ImageEventData).annotations({
  description: "The conversion finished: the image is published (status ready); the classifier consumes it."
})
export const ImageFailed = envelope("image.failed", ImageEventData).annotations({
  description: "The conversion failed for good (status failed, `failure` says why)."
})
export const ImageRated = envelope(
  "image.rated",
  Schema.extend(ImageEventData, Schema.Struct({ change: RatingChange }))
).annotations({
  description:
    "The effective rating changed (classifier, owner declaration, operator decision): the audit trail of every rating change."
})
export const ImageRatingReviewRequested = envelope(
  "image.rating_review_requested",
  Schema.extend(ImageEventData, Schema.Struct({ requested: DeclaredRating }))
).annotations({
  description: "The owner asked for a less strict rating; it waits for operator review, the effective rating unchanged."
})
export const ImageRatingReviewDecided = envelope(
  "image.rating_review_decided",
  Schema.extend(
    ImageEventData,
    Schema.Struct({
      requested: DeclaredRating,
      decision: Schema.Literal("approved", "rejected")
    })
  )
).annotations({ description: "An operator approved or rejected a rating reduction (`cli reviews approve|reject`)." })
export const ImageDeleted = envelope("image.deleted", ImageEventData).annotations({
  description: "The image was deleted (DELETE /images/{id}): its delivery URL answers 404 from then on."
})

export const ImageEvent = Schema.Union(
  ImageUploaded,
  ImageConversionRetry,
  ImageConverted,
  ImageFailed,
  ImageRated,
  ImageRatingReviewRequested,
  ImageRatingReviewDecided,
  ImageDeleted
).annotations({ identifier: "ImageEvent", description: "Topic images.v1, keyed by image id." })
export type ImageEvent = typeof ImageEvent.Type
