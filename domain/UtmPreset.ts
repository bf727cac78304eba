import { Schema } from "effect"
import type { AccountId } from "./Account.js"
import type { Utm } from "./Link.js"

/** A UTM preset's id: `utmp_` and base62 characters (22 issued), up to 64 like a link id. */
export const UtmPresetId = Schema.String.pipe(Schema.pattern(/^utmp_[0-9A-Za-z]{1,64}$/), Schema.brand("UtmPresetId"))
export type UtmPresetId = typeof UtmPresetId.Type

/** The stored state of a UTM preset: what the repository reads and writes. */
export interface UtmPresetRow {
  readonly id: UtmPresetId
  readonly accountId: AccountId
  readonly name: string
  readonly utm: typeof Utm.Type
  readonly createdAt: Date
  readonly updatedAt: Date
}

/**
 * The shape of the ids this service issues for presets; anything else names no preset and
 * must not reach SQL (PostgreSQL refuses NUL bytes; an id of any length would be looked up).
 */
export const isPresetId = Schema.is(UtmPresetId)

/** A stored preset with its keyset position (`seq`: insertion order). */
export type UtmPresetRecord = UtmPresetRow & { readonly seq: bigint }

export interface UtmPresetChanges {
  readonly name?: string | undefined
  readonly utm?: UtmPresetRow["utm"] | undefined
}
