import { Context, type Effect } from "effect"

/**
 * The database failed (connection lost, statement refused, commit failed): temporary from the
 * caller's view. Adapters fail with their own error value of this shape; its tag stays
 * `SqlError`, which the API answers with 503 dependency_unavailable and the workers retry.
 */
export interface DatabaseError {
  readonly _tag: "SqlError"
  readonly message: string
  readonly cause?: unknown
}

export interface TransactionsShape {
  /**
   * Runs the effect in one transaction: it commits when the effect succeeds and rolls back
   * when it fails. Inside a transaction it is a savepoint of the outer one. Every repository
   * call the effect makes joins the transaction.
   */
  readonly withTransaction: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DatabaseError, R>
}

export class Transactions extends Context.Tag("Transactions")<Transactions, TransactionsShape>() {}

export interface DatabaseHealthShape {
  /** A round trip to the database (readiness probes); callers bound it with their own timeout. */
  readonly ping: Effect.Effect<void, DatabaseError>
}

export class DatabaseHealth extends Context.Tag("DatabaseHealth")<DatabaseHealth, DatabaseHealthShape>() {}
