import { randomBytes } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { VisitorSecretRepo } from "../../domain/ports/VisitorSecretRepo.js"

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  const secretOf = (day: string) =>
    Effect.gen(function* () {
      yield* sql`
        INSERT INTO visitor_secrets (day, secret) VALUES (${day}::date, ${randomBytes(32)})
        ON CONFLICT (day) DO NOTHING`
      const rows = yield* sql<{ secret: Uint8Array }>`SELECT secret FROM visitor_secrets WHERE day = ${day}::date`
      return rows[0]!.secret
    })

  const deleteBefore = (day: string) => sql`DELETE FROM visitor_secrets WHERE day < ${day}::date`.pipe(Effect.asVoid)

  return VisitorSecretRepo.of({ secretOf, deleteBefore })
})

export const VisitorSecretRepoLive: Layer.Layer<VisitorSecretRepo, never, PgClient.PgClient> = Layer.effect(
  VisitorSecretRepo,
  make
)
