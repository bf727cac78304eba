import { Effect } from "effect"
import type { DatabaseError } from "../../domain/ports/Database.js"
import { VisitorSecretRepo } from "../../domain/ports/VisitorSecretRepo.js"
import { BoundedCache } from "../../infra/BoundedCache.js"
import { dayString, utcDay } from "./ClickClassify.js"

/**
 * The day's visitor-hash secret, shared by all redirector instances through the database: the
 * first to need a day's secret inserts one, everyone then reads the stored one. Rows older
 * than yesterday are deleted when a new day is fetched; yesterday stays because clicks from
 * just before midnight may still be in a buffer.
 */
export const makeVisitorSecrets = Effect.gen(function* () {
  const repo = yield* VisitorSecretRepo
  // Holds yesterday's and today's (older days are deleted below); the bound is a safety net.
  const cache = new BoundedCache<number, Uint8Array>({ maxWeight: 6 })

  const fetch = (day: number) =>
    Effect.gen(function* () {
      const secret = yield* repo.secretOf(dayString(day))
      const today = utcDay(Date.now())
      yield* repo.deleteBefore(dayString(today - 1))
      for (const d of cache.keys()) if (d < today - 1) cache.delete(d)
      if (day >= today - 1) cache.set(day, secret)
      return secret
    })

  /** The secret of a UTC day (days since the epoch). */
  const get = (day: number): Effect.Effect<Uint8Array, DatabaseError> => {
    const hit = cache.get(day)
    return hit === undefined ? fetch(day) : Effect.succeed(hit)
  }

  return { get } as const
})

export type VisitorSecrets = Effect.Effect.Success<typeof makeVisitorSecrets>
