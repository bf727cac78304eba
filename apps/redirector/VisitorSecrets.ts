import { randomBytes } from "node:crypto"
import type { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Effect } from "effect"
import { dayString, utcDay } from "./ClickClassify.js"

/**
 * The day's visitor-hash secret, shared by all redirector instances through PostgreSQL: the
 * first to need a day's secret inserts one, everyone then reads the stored one. Rows older
 * than yesterday are deleted when a new day is fetched; yesterday stays because clicks from
 * just before midnight may still be in a buffer.
 */
export const makeVisitorSecrets = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const cache = new Map<number, Uint8Array>()

  const fetch = (day: number) =>
    Effect.gen(function* () {
      const date = dayString(day)
      yield* sql`
        INSERT INTO visitor_secrets (day, secret) VALUES (${date}::date, ${randomBytes(32)})
        ON CONFLICT (day) DO NOTHING`
      const rows = yield* sql<{ secret: Uint8Array }>`SELECT secret FROM visitor_secrets WHERE day = ${date}::date`
      const today = utcDay(Date.now())
      yield* sql`DELETE FROM visitor_secrets WHERE day < ${dayString(today - 1)}::date`
      for (const d of cache.keys()) if (d < today - 1) cache.delete(d)
      const secret = rows[0]!.secret
      if (day >= today - 1) cache.set(day, secret)
      return secret
    })

  /** The secret of a UTC day (days since the epoch). */
  const get = (day: number): Effect.Effect<Uint8Array, SqlError> => {
    const hit = cache.get(day)
    return hit === undefined ? fetch(day) : Effect.succeed(hit)
  }

  return { get } as const
})

export type VisitorSecrets = Effect.Effect.Success<typeof makeVisitorSecrets>
