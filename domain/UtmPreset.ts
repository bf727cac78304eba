import type { Utm } from "./Link.js"

/** The stored state of a UTM preset: what the repository reads and writes. */
export interface UtmPresetRow {
  readonly id: string
  readonly accountId: string
  readonly name: string
  readonly utm: typeof Utm.Type
  readonly createdAt: Date
  readonly updatedAt: Date
}

/**
 * The shape of the ids this service issues for presets; anything else names no preset and
 * must not reach SQL (PostgreSQL refuses NUL bytes; an id of any length would be looked up).
 */
export const isPresetId = (id: string): boolean => /^utmp_[0-9A-Za-z]{1,64}$/.test(id)

/** A stored preset with its keyset position (`seq`: insertion order). */
export type UtmPresetRecord = UtmPresetRow & { readonly seq: bigint }

export interface UtmPresetChanges {
  readonly name?: string | undefined
  readonly utm?: UtmPresetRow["utm"] | undefined
}
