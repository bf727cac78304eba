import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { AccountId, ApiKeyId } from "../../domain/Account.js"
import { ImageFailed, InvalidInput, NotFound, QuotaExceeded, UnsupportedContent } from "../../domain/Errors.js"
import { usagePeriod } from "../../domain/Plan.js"
import { CORRUPT_PNG, emptyWorld, PNG, principal, upload, withImages } from "../support/imagePorts.js"

// The Images service over in-memory ports: each rule of the use cases, by name.

const owner = principal()
const stranger = principal({ accountId: AccountId.make("acct_2"), keyId: ApiKeyId.make("key_2") })

describe("Images.upload", () => {
  it.effect("a supported image becomes a processing image with its private source, its job and image.uploaded", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const row = yield* withImages(world, (images) => images.upload(owner, upload(PNG), undefined))
      expect(row.status).toBe("processing")
      expect(row.id).toMatch(/^[A-Za-z0-9]{7}$/)
      expect(row.requestedRating).toBe("auto")
      expect(row.mimeType).toBe("image/webp")
      expect(row.sourceKey).toMatch(/^sources\/[A-Za-z0-9]{22}$/)
      expect(world.blobs.get(row.sourceKey!)).toEqual(PNG)
      expect([...world.db.jobs]).toEqual([row.id])
      expect(world.db.events).toEqual([{ type: "image.uploaded", id: row.id }])
      expect(world.db.storage.get(owner.accountId)).toEqual({ ordinary: PNG.length, unmetered: 0 })
      expect(world.db.usage.get(`${owner.accountId} ${usagePeriod(new Date())} image_uploads`)).toBe(1)
    })
  )

  it.effect("bytes that are no supported image are UnsupportedContent naming what they look like", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const html = new TextEncoder().encode("<!doctype html><html><body>a post</body></html>")
      const raw = yield* withImages(world, (images) => Effect.flip(images.upload(owner, upload(html), undefined)))
      expect(raw).toEqual(
        new UnsupportedContent({
          message: "The bytes are not a JPEG, PNG, WebP or GIF image.",
          detail:
            "body: the bytes are not a JPEG, PNG, WebP or GIF image: they are an HTML page, whatever Content-Type was declared"
        })
      )
      const part = yield* withImages(world, (images) =>
        Effect.flip(images.upload(owner, upload(CORRUPT_PNG, { kind: "multipart" }), undefined))
      )
      expect(part).toBeInstanceOf(UnsupportedContent)
      expect(part.detail).toBe(
        "file: the image is damaged or truncated (unexpected end of file), whatever Content-Type was declared"
      )
      expect(world.db.images.size).toBe(0)
      expect(world.blobs.size).toBe(0)
    })
  )

  it.effect("the declared rating is the query parameter or the form field, which must be valid and agree", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const disagree = yield* withImages(world, (images) =>
        Effect.flip(images.upload(owner, upload(PNG, { kind: "multipart", contentRating: "nsfw" }), "general"))
      )
      expect(disagree).toEqual(
        new InvalidInput({
          message: "The request failed validation.",
          detail: "content_rating: the query parameter and the form field disagree"
        })
      )
      const invalid = yield* withImages(world, (images) =>
        Effect.flip(images.upload(owner, upload(PNG, { kind: "multipart", contentRating: "sensitive" }), undefined))
      )
      expect(invalid.detail).toBe("content_rating: must be auto, general or nsfw")
      expect(world.db.images.size).toBe(0)

      const declared = yield* withImages(world, (images) =>
        images.upload(owner, upload(PNG, { kind: "multipart", contentRating: "general" }), "general")
      )
      expect([declared.requestedRating, declared.rating, declared.ratingSource]).toEqual([
        "general",
        "general",
        "owner"
      ])
      // A declaration at upload is audited like every later change.
      expect(world.db.audit).toEqual([{ imageId: declared.id, to: "general", source: "owner", actor: owner.keyId }])
      const byQuery = yield* withImages(world, (images) => images.upload(owner, upload(PNG), "nsfw"))
      expect(byQuery.rating).toBe("nsfw")
    })
  )

  it.effect("the storage quota refuses an upload that does not fit and removes its source from the blob store", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const plans = { free: { storage_bytes: PNG.length + 4 } }
      const first = yield* withImages(world, (images) => images.upload(owner, upload(PNG), undefined), plans)
      const refused = yield* withImages(
        world,
        (images) => Effect.flip(images.upload(owner, upload(PNG), undefined)),
        plans
      )
      expect(refused).toEqual(
        new QuotaExceeded({
          message: "The image does not fit in the plan's storage (plan free).",
          detail: `storage_bytes: ${PNG.length} of ${PNG.length + 4} used; this image needs ${PNG.length} more`
        })
      )
      expect([...world.blobs.keys()]).toEqual([first.sourceKey])
      expect([...world.db.images.keys()]).toEqual([first.id])
      expect(world.db.storage.get(owner.accountId)?.ordinary).toBe(PNG.length)
    })
  )

  it.effect("the monthly upload quota refuses and nothing remains", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const plans = { free: { image_uploads_per_month: 1 } }
      const first = yield* withImages(world, (images) => images.upload(owner, upload(PNG), undefined), plans)
      const refused = yield* withImages(
        world,
        (images) => Effect.flip(images.upload(owner, upload(PNG), undefined)),
        plans
      )
      expect(refused).toEqual(
        new QuotaExceeded({
          message: `The plan's monthly image upload quota is used up (plan free, ${usagePeriod(new Date())} UTC).`,
          detail: "image_uploads_per_month: 1 of 1 used"
        })
      )
      // The refused upload's source was written, then removed; its rows were rolled back.
      expect([...world.blobs.keys()]).toEqual([first.sourceKey])
      expect([...world.db.images.keys()]).toEqual([first.id])
      expect([...world.db.jobs]).toEqual([first.id])
      expect(world.db.events).toEqual([{ type: "image.uploaded", id: first.id }])
      expect(world.db.storage.get(owner.accountId)?.ordinary).toBe(PNG.length)
    })
  )

  it.effect("an Unmetered Partner Key skips both quotas and its bytes count apart", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const partner = principal({ keyId: ApiKeyId.make("key_p"), unmetered: true })
      const plans = { free: { image_uploads_per_month: 0, storage_bytes: 0 } }
      yield* withImages(world, (images) => images.upload(partner, upload(PNG), undefined), plans)
      const row = yield* withImages(world, (images) => images.upload(partner, upload(PNG), undefined), plans)
      expect(row.unmetered).toBe(true)
      expect(world.db.storage.get(partner.accountId)).toEqual({ ordinary: 0, unmetered: 2 * PNG.length })
    })
  )
})

describe("Images: reading, rating and deleting", () => {
  /** A world with one image of the owner, declared at upload. */
  const withImage = (rating: "auto" | "general" | "nsfw") =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const row = yield* withImages(world, (images) => images.upload(owner, upload(PNG), rating))
      return { world, row }
    })

  it.effect("a declaration as strict or stricter applies at once; a less strict one goes to review", () =>
    Effect.gen(function* () {
      const { world, row } = yield* withImage("general")
      const stricter = yield* withImages(world, (images) => images.rate(owner, row.id, "sensitive"))
      expect(stricter.outcome).toBe("applied")
      expect([stricter.image.rating, stricter.image.ratingSource]).toEqual(["sensitive", "owner"])
      const same = yield* withImages(world, (images) => images.rate(owner, row.id, "sensitive"))
      expect(same.outcome).toBe("applied")

      const lower = yield* withImages(world, (images) => images.rate(owner, row.id, "general"))
      expect(lower.outcome).toBe("review")
      expect(lower.image.rating).toBe("sensitive")
      expect(lower.image.review).toEqual({ requested: "general", status: "pending" })

      // A declaration that applies supersedes the pending review.
      yield* withImages(world, (images) => images.rate(owner, row.id, "nsfw"))
      expect([...world.db.reviews.values()].filter((r) => r.status === "pending")).toEqual([])
    })
  )

  it.effect("an unrated image counts as nsfw: any lower declaration goes to review", () =>
    Effect.gen(function* () {
      const { world, row } = yield* withImage("auto")
      const declared = yield* withImages(world, (images) => images.rate(owner, row.id, "sensitive"))
      expect(declared.outcome).toBe("review")
      expect(declared.image.rating).toBe("unrated")
    })
  )

  it.effect("a failed image cannot be rated (ImageFailed)", () =>
    Effect.gen(function* () {
      const { world, row } = yield* withImage("nsfw")
      world.db.images.set(row.id, { ...row, status: "failed", failure: "too many pixels" })
      const error = yield* withImages(world, (images) => Effect.flip(images.rate(owner, row.id, "nsfw")))
      expect(error).toEqual(
        new ImageFailed({
          message: "The image's conversion failed; it cannot be rated.",
          detail: "failure: too many pixels"
        })
      )
    })
  )

  it.effect("another account's image is NotFound, and so are a deleted one and an id of no image's shape", () =>
    Effect.gen(function* () {
      const { world, row } = yield* withImage("general")
      const notFound = new NotFound({ message: "No such image." })
      const errors = yield* withImages(world, (images) =>
        Effect.all([
          Effect.flip(images.get(stranger, row.id)),
          Effect.flip(images.rate(stranger, row.id, "nsfw")),
          Effect.flip(images.delete(stranger, row.id)),
          Effect.flip(images.get(owner, "bad\u0000id"))
        ])
      )
      expect(errors).toEqual([notFound, notFound, notFound, notFound])
      expect(world.db.images.get(row.id)?.rating).toBe("general")
      expect(yield* withImages(world, (images) => images.list(stranger, { limit: 10 }))).toEqual([])

      const deleted = yield* withImages(world, (images) => images.delete(owner, row.id))
      expect(deleted.deletedAt).not.toBeNull()
      expect(world.db.storage.get(owner.accountId)?.ordinary).toBe(0)
      expect(yield* withImages(world, (images) => Effect.flip(images.get(owner, row.id)))).toEqual(notFound)
      expect(yield* withImages(world, (images) => images.list(owner, { limit: 10 }))).toEqual([])
    })
  )

  it.effect("the list is the account's images, newest first, after a keyset position", () =>
    Effect.gen(function* () {
      const world = emptyWorld()
      const rows = []
      for (let i = 0; i < 3; i++)
        rows.push(yield* withImages(world, (images) => images.upload(owner, upload(PNG), undefined)))
      const page = yield* withImages(world, (images) => images.list(owner, { limit: 2 }))
      expect(page.map((r) => r.id)).toEqual([rows[2]!.id, rows[1]!.id])
      const next = yield* withImages(world, (images) => images.list(owner, { afterSeq: page[1]!.seq, limit: 2 }))
      expect(next.map((r) => r.id)).toEqual([rows[0]!.id])
    })
  )
})
