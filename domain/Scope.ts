import { Schema } from "effect"

/** The nine independent permissions of the contract. No scope implies another. */
export const Scopes = [
  "links:read",
  "links:write",
  "snapshots:read",
  "snapshots:write",
  "images:read",
  "images:write",
  "analytics:read",
  "domains:read",
  "domains:write"
] as const

export const Scope = Schema.Literal(...Scopes)
export type Scope = typeof Scope.Type

export const isScope = Schema.is(Scope)
