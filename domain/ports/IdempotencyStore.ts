import { Context, type Effect, type Option } from "effect"
import type { DatabaseError } from "./Database.js"

/** A response stored under an idempotency key, replayed for the same request. */
export interface StoredResponse {
  readonly fingerprint: string
  readonly status: number
  readonly contentType: string | null
  readonly body: Uint8Array
}

export interface IdempotencyStoreShape {
  /**
   * A transaction-scoped lock on (account, key): false while another request with the same
   * key is still running. Released when the transaction ends.
   */
  readonly tryLock: (accountId: string, key: string) => Effect.Effect<boolean, DatabaseError>
  /** The stored response for this key, if it is younger than the retention period. */
  readonly find: (accountId: string, key: string) => Effect.Effect<Option.Option<StoredResponse>, DatabaseError>
  /** Stores the response; an expired record under the same key is replaced. */
  readonly save: (accountId: string, key: string, stored: StoredResponse) => Effect.Effect<void, DatabaseError>
  /** Deletes the records older than the retention period; returns how many. */
  readonly purgeExpired: Effect.Effect<number, DatabaseError>
}

/**
 * Idempotency records, scoped per account. Every call runs in the caller's transaction: the
 * record commits (or rolls back) with the change it answers for.
 */
export class IdempotencyStore extends Context.Tag("IdempotencyStore")<IdempotencyStore, IdempotencyStoreShape>() {}
