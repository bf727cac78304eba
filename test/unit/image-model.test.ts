import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Either, Exit, Schema } from "effect"
import { toApiImage } from "../../apps/api/Images/Api.js"
import { AccountId } from "../../domain/Account.js"
import { ImageEvent, ImageEventData } from "../../domain/Events.js"
import { Image, ImageId, ImageRecord, isImageId } from "../../domain/Image.js"
import {
  ImageEventPayload,
  ImageRatedPayload,
  ImageReviewDecidedPayload,
  ImageReviewRequestedPayload
} from "../../domain/ImageEventPayload.js"
import { Outbox } from "../../domain/ports/Outbox.js"
import { ImageFromRow, ImageRecordFromRow } from "../../infra/postgres/Images.js"
import { memoryPorts } from "../support/memoryPorts.js"

const image = new Image({
  id: ImageId.make("aB3dE5g"),
  accountId: AccountId.make("acct_3fG7hJ2kL9mN4pQ8rS1tV6"),
  status: "ready",
  unmetered: false,
  requestedRating: "auto",
  rating: "sensitive",
  ratingSource: "classifier",
  sourceFormat: "png",
  sourceBytes: 2048,
  sourceUrl: null,
  sourceKey: null,
  reservedBytes: 0,
  mimeType: "image/webp",
  ext: "webp",
  blobKey: "images/aB3dE5g.webp",
  width: 40,
  height: 30,
  frames: 1,
  animated: false,
  bytes: 1234,
  failure: null,
  createdAt: new Date("2025-03-10T12:00:00.000Z"),
  updatedAt: new Date("2025-03-10T12:30:00.123Z"),
  deletedAt: null,
  review: { requested: "general", status: "pending" }
})

const processing = new Image({
  ...image,
  status: "processing",
  rating: "unrated",
  ratingSource: null,
  blobKey: null,
  width: null,
  height: null,
  frames: null,
  animated: null,
  bytes: null,
  reservedBytes: 2048,
  review: null
})

const state = {
  id: "aB3dE5g",
  status: "ready",
  content_rating: "sensitive",
  rating_source: "classifier",
  mime_type: "image/webp",
  ext: "webp",
  width: 40,
  height: 30,
  bytes: 1234,
  animated: false,
  unmetered: false,
  failure: null,
  deleted: false,
  created_at: "2025-03-10T12:00:00.000Z",
  updated_at: "2025-03-10T12:30:00.123Z"
}

describe("the Image model", () => {
  it("ids are branded by IMAGE_ID_PATTERN; isImageId narrows a path id", () => {
    for (const id of ["aB3dE5g", "legacy_0123456789abcdef", "a-b_c-d"]) expect(isImageId(id), id).toBe(true)
    for (const id of ["short", "aB3dE5g.webp", "a".repeat(65), "aB3 dE5g"]) expect(isImageId(id), id).toBe(false)
    expect(() => ImageId.make("nope")).toThrow()
    expect(Schema.is(Image)({ ...image, id: "x" })).toBe(false)
  })

  it("an image event's data is the model encoded by ImageEventPayload; it cannot be decoded back", () => {
    const data = Schema.encodeSync(ImageEventPayload)(image)
    expect(data).toStrictEqual(state)
    expect(Schema.is(ImageEventData)(data)).toBe(true)
    expect(Schema.encodeSync(ImageEventPayload)(processing)).toMatchObject({
      status: "processing",
      content_rating: null,
      rating_source: null,
      bytes: null
    })
    expect(Schema.encodeSync(ImageEventPayload)({ ...image, deletedAt: new Date(0) }).deleted).toBe(true)
    expect(Either.isLeft(Schema.decodeUnknownEither(ImageEventPayload)(data))).toBe(true)
  })

  it("the rating and review events add their fields to the image's state", () => {
    const change = { from: "general" as const, to: "sensitive" as const, source: "classifier" as const, actor: "c" }
    expect(Schema.encodeSync(ImageRatedPayload)({ image, change })).toStrictEqual({ ...state, change })
    expect(Schema.encodeSync(ImageReviewRequestedPayload)({ image, requested: "general" })).toStrictEqual({
      ...state,
      requested: "general"
    })
    expect(
      Schema.encodeSync(ImageReviewDecidedPayload)({ image, requested: "general", decision: "rejected" })
    ).toStrictEqual({ ...state, requested: "general", decision: "rejected" })
  })

  it("the API record is the model under the contract's names, with its addresses", () => {
    const hosts = { apiBase: "http://api.test/v1", imageHost: "http://img.test" }
    expect(toApiImage(hosts)(image)).toStrictEqual({
      id: "aB3dE5g",
      status: "ready",
      status_url: "http://api.test/v1/images/aB3dE5g",
      url: "http://img.test/aB3dE5g.webp",
      share_url: "http://img.test/v/aB3dE5g",
      mime_type: "image/webp",
      content_rating: "sensitive",
      rating_source: "classifier",
      rating_review: { requested: "general", status: "pending" },
      width: 40,
      height: 30,
      bytes: 1234,
      animated: false,
      failure: null,
      created_at: "2025-03-10T12:00:00.000Z"
    })
    expect(toApiImage(hosts)({ ...processing, mimeType: null, ext: null, width: 1 })).toMatchObject({
      url: "http://img.test/aB3dE5g.webp",
      mime_type: "image/webp",
      content_rating: null,
      rating_source: null,
      rating_review: null,
      width: null
    })
  })

  it.effect("a row decodes into the model: review columns nested, int8 columns as numbers, seq as a bigint", () =>
    Effect.gen(function* () {
      const row = {
        seq: "42",
        id: "aB3dE5g",
        account_id: "acct_3fG7hJ2kL9mN4pQ8rS1tV6",
        status: "ready",
        unmetered: false,
        requested_rating: "auto",
        rating: "sensitive",
        rating_source: "classifier",
        source_format: "png",
        source_bytes: "2048",
        source_url: null,
        source_key: null,
        reserved_bytes: "0",
        mime_type: "image/webp",
        ext: "webp",
        blob_key: "images/aB3dE5g.webp",
        width: 40,
        height: 30,
        frames: 1,
        animated: false,
        bytes: "1234",
        failure: null,
        created_at: new Date("2025-03-10T12:00:00.000Z"),
        updated_at: new Date("2025-03-10T12:30:00.123Z"),
        deleted_at: null,
        review_requested: "general",
        review_status: "pending"
      }
      const decoded = yield* Schema.decodeUnknown(ImageFromRow)(row)
      expect(decoded).toBeInstanceOf(Image)
      expect({ ...decoded }).toStrictEqual({ ...image })
      const record = yield* Schema.decodeUnknown(ImageRecordFromRow)(row)
      expect(record).toBeInstanceOf(ImageRecord)
      expect({ ...record }).toStrictEqual({ ...image, seq: 42n })
      const unreviewed = yield* Schema.decodeUnknown(ImageFromRow)({
        ...row,
        review_requested: null,
        review_status: null
      })
      expect(unreviewed.review).toBeNull()
      const refused = yield* Effect.exit(Schema.decodeUnknown(ImageFromRow)({ ...row, account_id: "acc_1" }))
      expect(Exit.isFailure(refused)).toBe(true)
    })
  )

  it.effect("appendEvent stores the data as the schema encodes it; data the schema refuses is a defect", () => {
    const { state: ports, layer } = memoryPorts()
    return Effect.gen(function* () {
      const outbox = yield* Outbox
      const event = yield* outbox.appendEvent(
        ImageEventPayload,
        "images.v1",
        image.id,
        "image.converted",
        image.accountId,
        image
      )
      expect(Schema.is(ImageEvent)(event)).toBe(true)
      expect(ports.events[0]?.data).toStrictEqual(state)
      // A malformed id typed as an ImageId: the model refuses it, so appendEvent dies.
      const invalid = { ...image, id: "x" as ImageId }
      const exit = yield* Effect.exit(
        outbox.appendEvent(ImageEventPayload, "images.v1", image.id, "image.converted", image.accountId, invalid)
      )
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(ports.events).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })
})
