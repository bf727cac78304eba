import { Effect, Option } from "effect"
import { type DeclaredRating, type Image, type RatingReview, RatingReviewId } from "../../domain/Image.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { RatingReviewRepo } from "../../domain/ports/RatingReviewRepo.js"
import { storageOf, type World } from "./imageWorld.js"

/** In-memory ImageRepo and RatingReviewRepo over a World (test/support/imageWorld.ts). */

export const makeImageRepo = (world: World) => {
  const put = (row: Image) => {
    world.db.images.set(row.id, row)
    return row
  }
  const live = (accountId: string, id: string) =>
    Effect.sync(() =>
      Option.fromNullable(world.db.images.get(id)).pipe(
        Option.filter((row) => row.accountId === accountId && row.deletedAt === null)
      )
    )
  const emit = (type: string, row: Image) =>
    Effect.sync(() => {
      world.db.events.push({ type, id: row.id })
      return {
        id: `evt_${world.db.events.length}`,
        type,
        version: 1 as const,
        occurred_at: "",
        account_id: "",
        data: {}
      }
    })
  return ImageRepo.of({
    insert: (image) =>
      Effect.sync(() => {
        if (world.db.images.has(image.id)) return Option.none()
        const now = new Date()
        world.db.seq += 1n
        world.db.seqs.set(image.id, world.db.seq)
        return Option.some(
          put({
            id: image.id,
            accountId: image.accountId,
            status: "processing",
            unmetered: image.unmetered,
            requestedRating: image.requestedRating,
            rating: image.requestedRating === "auto" ? "unrated" : image.requestedRating,
            ratingSource: image.requestedRating === "auto" ? null : "owner",
            sourceFormat: image.sourceFormat,
            sourceBytes: image.sourceBytes,
            sourceUrl: image.sourceUrl,
            sourceKey: image.sourceKey ?? null,
            reservedBytes: image.sourceBytes,
            mimeType: image.mimeType,
            ext: image.ext,
            blobKey: null,
            width: null,
            height: null,
            frames: null,
            animated: null,
            bytes: null,
            failure: null,
            createdAt: now,
            updatedAt: now,
            deletedAt: null,
            review: null
          })
        )
      }),
    byId: (id) => Effect.sync(() => Option.fromNullable(world.db.images.get(id))),
    lockById: (id) => Effect.sync(() => Option.fromNullable(world.db.images.get(id))),
    find: live,
    findForUpdate: live,
    search: (accountId, { afterSeq, limit }) =>
      Effect.sync(() =>
        [...world.db.images.values()]
          .filter((r) => r.accountId === accountId && r.deletedAt === null)
          .map((r) => ({ ...r, seq: world.db.seqs.get(r.id) ?? 0n }))
          .filter((r) => afterSeq === undefined || r.seq < afterSeq)
          .sort((a, b) => Number(b.seq - a.seq))
          .slice(0, limit)
      ),
    delivery: () => Effect.dieMessage("not used"),
    emit,
    emitReviewRequested: (image) => emit("image.rating_review_requested", image),
    emitReviewDecided: (image) => emit("image.rating_review_decided", image),
    softDelete: (image) =>
      Effect.gen(function* () {
        const usage = storageOf(world, image.accountId)
        const freed = (image.bytes ?? 0) + image.reservedBytes
        world.db.storage.set(
          image.accountId,
          image.unmetered
            ? { ...usage, unmetered: Math.max(0, usage.unmetered - freed) }
            : { ...usage, ordinary: Math.max(0, usage.ordinary - freed) }
        )
        world.db.jobs.delete(image.id)
        const row = put({ ...world.db.images.get(image.id)!, deletedAt: new Date() })
        yield* emit("image.deleted", row)
        return row
      }),
    deletedBlobs: () => Effect.succeed([]),
    blobRemoved: () => Effect.void,
    rate: (image, to, source, actor) =>
      Effect.gen(function* () {
        if (image.rating === to && image.ratingSource === source) return image
        const row = put({ ...world.db.images.get(image.id)!, rating: to, ratingSource: source })
        world.db.audit.push({ imageId: image.id, to, source, actor })
        yield* emit("image.rated", row)
        return row
      }),
    auditDeclaration: (image, actor) =>
      image.ratingSource !== "owner"
        ? Effect.void
        : Effect.gen(function* () {
            world.db.audit.push({ imageId: image.id, to: image.rating, source: "owner", actor })
            yield* emit("image.rated", image)
          })
  })
}

export const makeReviewRepo = (world: World) => {
  const setReview = (imageId: string, review: Image["review"]) => {
    const row = { ...world.db.images.get(imageId)!, review }
    world.db.images.set(imageId, row)
    return row
  }
  const decide = (review: RatingReview, decision: "approved" | "rejected") =>
    Effect.sync(() => {
      world.db.reviews.set(review.id, { ...review, status: decision, decidedAt: new Date() })
      const image = world.db.images.get(review.imageId)
      if (image === undefined) return Option.none()
      const rated: Image = {
        ...image,
        ...(decision === "approved" ? { rating: review.requested, ratingSource: "operator" as const } : {}),
        review: { requested: review.requested, status: decision }
      }
      world.db.images.set(image.id, rated)
      world.db.events.push({ type: "image.rating_review_decided", id: image.id })
      return Option.some(rated)
    })
  return RatingReviewRepo.of({
    request: (image, requested: DeclaredRating) =>
      Effect.sync(() => {
        for (const r of world.db.reviews.values()) {
          if (r.imageId === image.id && r.status === "pending") world.db.reviews.delete(r.id)
        }
        const id = RatingReviewId.make(`rev_${world.db.reviews.size + 1}x${image.id.replace(/[^0-9A-Za-z]/g, "")}`)
        world.db.reviews.set(id, {
          id,
          imageId: image.id,
          accountId: image.accountId,
          requested,
          currentRating: image.rating,
          status: "pending",
          createdAt: new Date(),
          decidedAt: null
        })
        world.db.events.push({ type: "image.rating_review_requested", id: image.id })
        return setReview(image.id, { requested, status: "pending" })
      }),
    closePending: (imageId) =>
      Effect.sync(() => {
        for (const r of world.db.reviews.values()) {
          if (r.imageId === imageId && r.status === "pending") world.db.reviews.delete(r.id)
        }
      }),
    pending: () => Effect.sync(() => [...world.db.reviews.values()].filter((r) => r.status === "pending")),
    findForUpdate: (id) => Effect.sync(() => Option.fromNullable(world.db.reviews.get(id))),
    decide
  })
}
