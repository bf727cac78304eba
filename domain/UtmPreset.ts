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
