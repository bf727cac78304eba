import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { Images } from "../../apps/api/Images/Images.js"
import { RatingReviews, ReviewAlreadyDecided, ReviewNotFound } from "../../apps/api/Images/RatingReviews.js"
import { Usage } from "../../apps/api/Usage/Usage.js"
import { ApiKeyId } from "../../domain/Account.js"
import { usagePeriod } from "../../domain/Plan.js"
import { emptyWorld, imagePortsLayer, PNG, principal, upload, type World } from "../support/imagePorts.js"
import { memoryDomainsLayer } from "../support/memoryDomains.js"

// The Usage and RatingReviews services over in-memory ports.

const services = (world: World) =>
  Layer.mergeAll(Images.Default, Usage.Default, RatingReviews.Default).pipe(
    Layer.provide(
      imagePortsLayer(world, { free: { links_per_month: 7, image_uploads_per_month: 5, storage_bytes: 100 } })
    ),
    Layer.provide(memoryDomainsLayer())
  )

const raw = upload(PNG)
const owner = principal()
const partner = principal({ keyId: ApiKeyId.make("key_p"), unmetered: true })

describe("Usage.get", () => {
  it.effect(
    "ordinary keys count only ordinary bytes against their limit; a Partner key sees the total and no limits",
    () =>
      Effect.gen(function* () {
        const world = emptyWorld()
        world.db.usage.set(`${owner.accountId} ${usagePeriod(new Date())} links`, 3)
        const [ordinary, unmetered] = yield* Effect.gen(function* () {
          const images = yield* Images
          yield* images.upload(owner, raw, undefined)
          yield* images.upload(partner, raw, undefined)
          const usage = yield* Usage
          return [yield* usage.get(owner), yield* usage.get(partner)] as const
        }).pipe(Effect.provide(services(world)))
        expect(ordinary).toEqual({
          plan: "free",
          links: { used: 3, limit: 7 },
          imageUploads: { used: 2, limit: 5 },
          storage: { used: PNG.length, limit: 100, totalUsed: 2 * PNG.length, unmeteredUsed: PNG.length },
          domains: { used: 0, limit: 5 },
          snapshots: { used: 0, limit: 10_000 }
        })
        expect(unmetered).toEqual({
          plan: "free",
          links: { used: 3, limit: null },
          imageUploads: { used: 2, limit: null },
          storage: { used: 2 * PNG.length, limit: null, totalUsed: 2 * PNG.length, unmeteredUsed: PNG.length },
          domains: { used: 0, limit: null },
          snapshots: { used: 0, limit: null }
        })
      })
  )
})

describe("RatingReviews", () => {
  it.effect("an operator's approval applies the requested rating in its own transaction, once", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      yield* Effect.gen(function* () {
        const images = yield* Images
        const reviews = yield* RatingReviews
        const image = yield* images.upload(owner, raw, "nsfw")
        yield* images.rate(owner, image.id, "general")
        const [pending] = yield* reviews.pending()
        expect(pending).toMatchObject({ imageId: image.id, requested: "general", currentRating: "nsfw" })

        const decided = yield* reviews.decide(pending!.id, "approved")
        expect(world.transactions).toBe(1)
        expect(decided.decision).toBe("approved")
        expect(Option.map(decided.image, (row) => [row.rating, row.ratingSource])).toEqual(
          Option.some(["general", "operator"])
        )
        expect(yield* reviews.pending()).toEqual([])

        const again = yield* Effect.flip(reviews.decide(pending!.id, "rejected"))
        expect(again).toEqual(
          new ReviewAlreadyDecided({ id: pending!.id, message: `review ${pending!.id} is already approved` })
        )
        expect(world.db.images.get(image.id)?.rating).toBe("general")
      }).pipe(Effect.provide(services(world)))
    })
  )

  it.effect("an unknown review is ReviewNotFound", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Effect.flatMap(RatingReviews, (r) => r.decide("rev_x", "approved"))).pipe(
        Effect.provide(services(emptyWorld()))
      )
      expect(error).toEqual(new ReviewNotFound({ id: "rev_x", message: "no rating review rev_x" }))
    })
  )

  it.effect("open abuse reports are listed as filed", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const report = { id: "rep_1", image_id: "abcdefg", reason: "spam", created_at: new Date(0) }
      world.reports.push(report)
      const open = yield* Effect.flatMap(RatingReviews, (r) => r.openReports()).pipe(Effect.provide(services(world)))
      expect(open).toEqual([report])
    })
  )
})
