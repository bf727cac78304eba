import { PgClient } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { DatabaseHealth } from "../../domain/ports/Database.js"

/** The readiness probe: one `SELECT 1` round trip. */
export const DatabaseHealthLive: Layer.Layer<DatabaseHealth, never, PgClient.PgClient> = Layer.effect(
  DatabaseHealth,
  Effect.map(PgClient.PgClient, (sql) => DatabaseHealth.of({ ping: sql`SELECT 1`.pipe(Effect.asVoid) }))
)
