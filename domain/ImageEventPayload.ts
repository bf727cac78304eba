import { ParseResult, Schema, type SchemaAST } from "effect"
import { ImageEventData, RatingChange } from "./Events.js"
import { DeclaredRating, Image } from "./Image.js"

/** The model's fields as a struct: encoding checks them without needing a class instance. */
const ImageFields = Schema.Struct(Image.fields)
type ImageFieldsEncoded = typeof ImageFields.Encoded

/** The image's state as every images.v1 event carries it. */
const stateOf = (image: ImageFieldsEncoded): typeof ImageEventData.Type => ({
  id: image.id,
  status: image.status,
  content_rating: image.status === "processing" ? null : image.rating,
  rating_source: image.ratingSource,
  mime_type: image.mimeType,
  ext: image.ext,
  width: image.width,
  height: image.height,
  bytes: image.bytes,
  animated: image.animated,
  unmetered: image.unmetered,
  failure: image.failure,
  deleted: image.deletedAt !== null,
  created_at: image.createdAt.toISOString(),
  updated_at: image.updatedAt.toISOString()
})

/**
 * The event data is a view of the image (no source, blob key or review; `deleted` for
 * `deletedAt`; no rating while processing): an image cannot be rebuilt from it, so decoding
 * is forbidden. Consumers read events with ImageEvent.
 */
const oneWay = (ast: SchemaAST.AST, actual: unknown) =>
  ParseResult.fail(new ParseResult.Forbidden(ast, actual, "an image event's data does not carry the whole image"))

/**
 * An image event's data as a transformation of the model: encoding an Image gives
 * ImageEventData (how Images makes every image event, through Outbox.appendEvent).
 */
export const ImageEventPayload = Schema.transformOrFail(ImageEventData, ImageFields, {
  strict: true,
  decode: (data, _, ast) => oneWay(ast, data),
  encode: (image) => ParseResult.succeed(stateOf(image))
})

/** image.rated: the image's state and the change. */
export const ImageRatedPayload = Schema.transformOrFail(
  Schema.extend(ImageEventData, Schema.Struct({ change: RatingChange })),
  Schema.Struct({ image: ImageFields, change: RatingChange }),
  {
    strict: true,
    decode: (data, _, ast) => oneWay(ast, data),
    encode: ({ image, change }) => ParseResult.succeed({ ...stateOf(image), change })
  }
)

/** image.rating_review_requested: the image's state and the rating asked for. */
export const ImageReviewRequestedPayload = Schema.transformOrFail(
  Schema.extend(ImageEventData, Schema.Struct({ requested: DeclaredRating })),
  Schema.Struct({ image: ImageFields, requested: DeclaredRating }),
  {
    strict: true,
    decode: (data, _, ast) => oneWay(ast, data),
    encode: ({ image, requested }) => ParseResult.succeed({ ...stateOf(image), requested })
  }
)

const Decision = Schema.Literal("approved", "rejected")

/** image.rating_review_decided: the image's state, the rating asked for and the decision. */
export const ImageReviewDecidedPayload = Schema.transformOrFail(
  Schema.extend(ImageEventData, Schema.Struct({ requested: DeclaredRating, decision: Decision })),
  Schema.Struct({ image: ImageFields, requested: DeclaredRating, decision: Decision }),
  {
    strict: true,
    decode: (data, _, ast) => oneWay(ast, data),
    encode: ({ image, requested, decision }) => ParseResult.succeed({ ...stateOf(image), requested, decision })
  }
)
