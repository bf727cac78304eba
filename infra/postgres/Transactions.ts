import { PgClient } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { Transactions } from "../../domain/ports/Database.js"

/** Transactions of the PgClient: every repository on the same client joins them. */
export const TransactionsLive: Layer.Layer<Transactions, never, PgClient.PgClient> = Layer.effect(
  Transactions,
  Effect.map(PgClient.PgClient, (sql) => Transactions.of({ withTransaction: sql.withTransaction }))
)
