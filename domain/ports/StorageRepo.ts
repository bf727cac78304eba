import { Context, type Effect, type Option } from "effect"
import type { StorageUsage } from "../Image.js"

export interface StorageRepoShape {
  /**
   * Adds `bytes` to the account's ordinary or Partner storage unless that goes past `limit`
   * (null: no limit): the new total, or None when refused, and then nothing changed.
   * Concurrent reservations of the account are serialized until commit, so the limit holds
   * exactly.
   */
  readonly reserve: (
    accountId: string,
    unmetered: boolean,
    bytes: number,
    limit: number | null
  ) => Effect.Effect<Option.Option<number>>
  /** Adds `delta` (negative: frees), never below 0. */
  readonly adjust: (accountId: string, unmetered: boolean, delta: number) => Effect.Effect<void>
  /** Stored bytes (reservations included) of the account's ordinary and Partner images. */
  readonly current: (accountId: string) => Effect.Effect<StorageUsage>
}

/** Storage accounting of hosted images, per account, in the caller's transaction. */
export class StorageRepo extends Context.Tag("StorageRepo")<StorageRepo, StorageRepoShape>() {}
