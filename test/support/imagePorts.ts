import { Effect, Either, Layer, Option } from "effect"
import { Images } from "../../apps/api/Images/Images.js"
import type { Upload } from "../../apps/api/middleware/Upload.js"
import { sniffImageFormat } from "../../domain/ImageFormat.js"
import type { PlanLimits } from "../../domain/Plan.js"
import { AbuseReportRepo } from "../../domain/ports/AbuseReportRepo.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { Codec, CorruptImage, NotAnImage } from "../../domain/ports/Codec.js"
import { Transactions } from "../../domain/ports/Database.js"
import { ImageJobRepo } from "../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import { RatingReviewRepo } from "../../domain/ports/RatingReviewRepo.js"
import { SafeFetcher } from "../../domain/ports/SafeFetcher.js"
import { StorageRepo } from "../../domain/ports/StorageRepo.js"
import { UsageRepo } from "../../domain/ports/UsageRepo.js"
import { Plans } from "../../infra/Plans.js"
import { makeImageRepo, makeReviewRepo } from "./imageRepos.js"
import { INFO, PNG, savepoint, storageOf, type World } from "./imageWorld.js"

export { CORRUPT_PNG, emptyWorld, INFO, PNG, principal, type World } from "./imageWorld.js"

/** Every port the image services need, over one world. */
export const imagePortsLayer = (world: World, plans: Parameters<typeof Plans.make>[0] = {}) =>
  Layer.mergeAll(
    Layer.succeed(ImageRepo, makeImageRepo(world)),
    Layer.succeed(RatingReviewRepo, makeReviewRepo(world)),
    Layer.succeed(
      ImageJobRepo,
      ImageJobRepo.of({
        insert: (imageId) => Effect.sync(() => void world.db.jobs.add(imageId)),
        claim: () => Effect.succeedNone,
        due: () => Effect.succeed([]),
        renewLease: () => Effect.succeed(false),
        releaseAll: () => Effect.succeed(0),
        retryLater: () => Effect.void,
        expired: () => Effect.succeed([]),
        markReady: () => Effect.succeedNone,
        markFailed: () => Effect.succeedNone,
        staleSources: () => Effect.succeed([]),
        sourceRemoved: () => Effect.void
      })
    ),
    Layer.succeed(
      StorageRepo,
      StorageRepo.of({
        reserve: (accountId, unmetered, bytes, limit) =>
          Effect.sync(() => {
            const usage = storageOf(world, accountId)
            const used = unmetered ? usage.unmetered : usage.ordinary
            if (limit !== null && used + bytes > limit) return Option.none()
            world.db.storage.set(
              accountId,
              unmetered ? { ...usage, unmetered: used + bytes } : { ...usage, ordinary: used + bytes }
            )
            return Option.some(used + bytes)
          }),
        adjust: () => Effect.dieMessage("not used"),
        current: (accountId) => Effect.sync(() => storageOf(world, accountId))
      })
    ),
    Layer.succeed(
      UsageRepo,
      UsageRepo.of({
        reserve: () => Effect.dieMessage("not used"),
        current: (accountId, period, metric) =>
          Effect.sync(() => world.db.usage.get(`${accountId} ${period} ${metric}`) ?? 0),
        counted: (accountId, period, metric, limit, use) =>
          savepoint(
            world,
            Effect.flatMap(use, (a) =>
              Effect.sync(() => {
                const key = `${accountId} ${period} ${metric}`
                const used = world.db.usage.get(key) ?? 0
                if (limit !== null && used + 1 > limit) return Either.left(used)
                world.db.usage.set(key, used + 1)
                return Either.right(a)
              })
            ),
            Either.isRight
          )
      })
    ),
    Layer.succeed(
      BlobStore,
      BlobStore.of({
        put: (key, bytes) => Effect.sync(() => void world.blobs.set(key, bytes)),
        get: (key) => Effect.sync(() => Option.fromNullable(world.blobs.get(key))),
        remove: (key) => Effect.sync(() => void world.blobs.delete(key))
      })
    ),
    Layer.succeed(
      Codec,
      Codec.of({
        probe: (bytes) =>
          sniffImageFormat(bytes) === null
            ? Effect.fail(new NotAnImage({ message: "unsupported image format" }))
            : bytes.length < PNG.length
              ? Effect.fail(new CorruptImage({ message: "unexpected end of file" }))
              : Effect.succeed(INFO),
        convert: () => Effect.dieMessage("not used")
      })
    ),
    Layer.succeed(
      SafeFetcher,
      SafeFetcher.of({
        fetch: () => Effect.suspend(() => Either.match(world.fetch, { onLeft: Effect.fail, onRight: Effect.succeed }))
      })
    ),
    Layer.succeed(
      AbuseReportRepo,
      AbuseReportRepo.of({
        file: () => Effect.dieMessage("not used"),
        open: () => Effect.sync(() => world.reports)
      })
    ),
    Layer.succeed(
      Transactions,
      Transactions.of({
        withTransaction: (self) =>
          Effect.suspend(() => {
            world.transactions++
            return savepoint(world, self)
          })
      })
    ),
    Plans.make(plans)
  )

/** An upload as the UploadBody middleware hands it over (raw unless told). */
export const upload = (bytes: Uint8Array, options: Partial<Upload> = {}): Upload => ({
  kind: "raw",
  bytes,
  declaredType: "image/png",
  contentRating: undefined,
  sha256: "",
  fingerprint: "",
  ...options
})

/** Runs `f` with the Images service over the world's ports (and a plan table with these overrides). */
export const withImages = <A, E>(
  world: World,
  f: (images: Images) => Effect.Effect<A, E>,
  plans: Record<string, Partial<PlanLimits>> = {}
) => Effect.flatMap(Images, f).pipe(Effect.provide(Images.Default.pipe(Layer.provide(imagePortsLayer(world, plans)))))
