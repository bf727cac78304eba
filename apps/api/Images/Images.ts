import { Effect, Option } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { ImageFailed, NotFound } from "../../../domain/Errors.js"
import { type DeclaredRating, declarationOutcome, type Image, isImageId } from "../../../domain/Image.js"
import { ImageRepo } from "../../../domain/ports/ImageRepo.js"
import { RatingReviewRepo } from "../../../domain/ports/RatingReviewRepo.js"
import { makeImageIntake } from "./ImageIntake.js"

/**
 * What an owner's rating declaration did: applied at once (`applied`), or recorded for
 * operator review with the effective rating unchanged (`review`).
 */
export interface RatingDeclared {
  readonly outcome: "applied" | "review"
  readonly image: Image
}

/**
 * Hosted images, as the API, the CLI, the workers and tests use them: upload and URL import
 * (ImageIntake.ts), reading, rating and deleting an account's images. Fails only with domain
 * errors and answers with domain records. Services open no transaction: every write runs in
 * the caller's (the API's IdempotentOperations opens one per POST, PATCH and DELETE).
 */
export class Images extends Effect.Service<Images>()("Images", {
  effect: Effect.gen(function* () {
    const intake = yield* makeImageIntake
    const images = yield* ImageRepo
    const reviews = yield* RatingReviewRepo

    /**
     * The account's image, or NotFound: another account's, a deleted one, and an id of a
     * shape no image has (which must not reach the database) are all no such image.
     */
    const owned = (principal: Principal, id: string, forUpdate = false) =>
      Effect.gen(function* () {
        const row = !isImageId(id)
          ? Option.none()
          : yield* forUpdate ? images.findForUpdate(principal.accountId, id) : images.find(principal.accountId, id)
        if (Option.isNone(row)) return yield* new NotFound({ message: "No such image." })
        return row.value
      })

    const get = Effect.fn("Images.get")(function* (principal: Principal, id: string) {
      return yield* owned(principal, id)
    })

    /** The account's images, newest first, after `afterSeq` (keyset paging). */
    const list = Effect.fn("Images.list")(function* (
      principal: Principal,
      page: { readonly afterSeq?: bigint | undefined; readonly limit: number }
    ) {
      return yield* images.search(principal.accountId, page)
    })

    /**
     * An owner's declaration. A failed image cannot be rated. Against the effective rating
     * (also while processing: a declaration made at upload is already effective, and
     * `unrated` counts as nsfw), as strict or stricter applies at once and supersedes a
     * pending review; less strict goes to operator review.
     */
    const rate = Effect.fn("Images.rate")(function* (principal: Principal, id: string, requested: DeclaredRating) {
      const row = yield* owned(principal, id, true)
      if (row.status === "failed") {
        return yield* new ImageFailed({
          message: "The image's conversion failed; it cannot be rated.",
          detail: `failure: ${row.failure ?? "unknown"}`
        })
      }
      if (declarationOutcome(row.rating, requested) === "apply") {
        yield* reviews.closePending(row.id)
        yield* images.rate(row, requested, "owner", principal.keyId)
        const rated = yield* owned(principal, row.id)
        return { outcome: "applied", image: rated } satisfies RatingDeclared
      }
      const reviewed = yield* reviews.request(row, requested)
      return { outcome: "review", image: reviewed } satisfies RatingDeclared
    })

    /** Deletes the account's image; the image as it was when deleted. */
    const remove = Effect.fn("Images.delete")(function* (principal: Principal, id: string) {
      const row = yield* owned(principal, id, true)
      return yield* images.softDelete(row)
    })

    return { ...intake, get, list, rate, delete: remove } as const
  })
}) {}
