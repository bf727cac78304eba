import { Context, type Effect, type Option } from "effect"
import type { AccountId } from "../Account.js"
import type { UtmPresetChanges, UtmPresetId, UtmPresetRecord, UtmPresetRow } from "../UtmPreset.js"

export interface UtmPresetRepoShape {
  /** Inserts unless the account already has a preset of that name; None then. */
  readonly insert: (
    preset: Omit<UtmPresetRow, "createdAt" | "updatedAt">
  ) => Effect.Effect<Option.Option<UtmPresetRecord>>
  readonly find: (accountId: AccountId, id: UtmPresetId) => Effect.Effect<Option.Option<UtmPresetRecord>>
  /** The same, locked for the rest of the transaction. */
  readonly findForUpdate: (accountId: AccountId, id: UtmPresetId) => Effect.Effect<Option.Option<UtmPresetRecord>>
  /**
   * Applies the changes; None when the new name is taken by another preset of the account,
   * and then the surrounding transaction stays usable.
   */
  readonly update: (id: UtmPresetId, changes: UtmPresetChanges) => Effect.Effect<Option.Option<UtmPresetRecord>>
  /** Deletes the account's preset; returns it as it was, or None when there is none. */
  readonly remove: (accountId: AccountId, id: UtmPresetId) => Effect.Effect<Option.Option<UtmPresetRecord>>
  /** The account's presets, newest first, after the keyset position `afterSeq`. */
  readonly list: (
    accountId: AccountId,
    options: { readonly afterSeq?: bigint | undefined; readonly limit: number }
  ) => Effect.Effect<ReadonlyArray<UtmPresetRecord>>
}

/** UTM presets. Every call runs in the caller's transaction. */
export class UtmPresetRepo extends Context.Tag("UtmPresetRepo")<UtmPresetRepo, UtmPresetRepoShape>() {}
