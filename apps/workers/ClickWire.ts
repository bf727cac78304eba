import { Schema } from "effect"
import {
  type AccountClickColumnsData,
  type BatchedClick,
  type ClickColumnsData,
  ClickRecorded,
  clickColumnsProblem,
  envelope,
  MAX_CLICKS_PER_EVENT
} from "../../domain/Events.js"

const DEVICES = new Set(["desktop", "mobile", "tablet", "other"])

const isNullOrString = (u: unknown) => u === null || typeof u === "string"

/** The shape of a BatchedClick (domain/Events.ts), checked by hand: this runs for every click. */
export const isBatchedClick = (u: unknown): u is BatchedClick => {
  if (typeof u !== "object" || u === null) return false
  const c = u as Record<string, unknown>
  return (
    typeof c.at === "number" &&
    Number.isSafeInteger(c.at) &&
    c.at >= 0 &&
    isNullOrString(c.country) &&
    isNullOrString(c.referrer_host) &&
    typeof c.device === "string" &&
    DEVICES.has(c.device) &&
    typeof c.browser === "string" &&
    typeof c.bot === "boolean" &&
    typeof c.visitor === "string"
  )
}

const isClickList = (u: unknown): u is ReadonlyArray<BatchedClick> => {
  if (!Array.isArray(u) || u.length === 0 || u.length > MAX_CLICKS_PER_EVENT) return false
  for (const c of u) if (!isBatchedClick(c)) return false
  return true
}

const isIntArray = (u: unknown, min: number): u is ReadonlyArray<number> => {
  if (!Array.isArray(u)) return false
  for (const x of u) if (typeof x !== "number" || !Number.isInteger(x) || x < min) return false
  return true
}

const isNullOrStringArray = (u: unknown): u is ReadonlyArray<string | null> => {
  if (!Array.isArray(u)) return false
  for (const x of u) if (!isNullOrString(x)) return false
  return true
}

const isClickVisitor = (u: unknown) => {
  if (typeof u !== "object" || u === null) return false
  const v = u as Record<string, unknown>
  return (
    typeof v.visitor === "string" &&
    typeof v.device === "string" &&
    DEVICES.has(v.device) &&
    typeof v.browser === "string" &&
    typeof v.bot === "boolean"
  )
}

/** The value columns versions 2 and 3 share, checked by hand: one loop per column. */
const hasValueColumns = (d: Record<string, unknown>) =>
  isNullOrStringArray(d.countries) &&
  isNullOrStringArray(d.referrer_hosts) &&
  Array.isArray(d.visitors) &&
  d.visitors.every(isClickVisitor) &&
  isIntArray(d.at, Number.MIN_SAFE_INTEGER) &&
  isIntArray(d.country, 0) &&
  isIntArray(d.referrer, 0) &&
  isIntArray(d.visitor, 0)

/** The shape of ClickColumnsData (domain/Events.ts), checked by hand. */
export const isClickColumns = (u: unknown): u is ClickColumnsData => {
  if (typeof u !== "object" || u === null) return false
  const d = u as Record<string, unknown>
  return (
    typeof d.link_id === "string" &&
    hasValueColumns(d) &&
    clickColumnsProblem(d as unknown as ClickColumnsData) === undefined
  )
}

/** The shape of AccountClickColumnsData (domain/Events.ts), checked by hand. */
export const isAccountClickColumns = (u: unknown): u is AccountClickColumnsData => {
  if (typeof u !== "object" || u === null) return false
  const d = u as Record<string, unknown>
  return (
    Array.isArray(d.links) &&
    d.links.every((l) => typeof l === "string") &&
    isIntArray(d.link, 0) &&
    hasValueColumns(d) &&
    clickColumnsProblem(d as unknown as AccountClickColumnsData) === undefined
  )
}

/**
 * What the projector decodes clicks.v1 with: the same events as ClickEvent, but the clicks of
 * a `clicks.recorded` batch are checked by plain loops instead of a Schema decode each
 * (a test keeps the two in agreement). An event that fails is poison, as with the full schema.
 */
export const ClickEventWire = Schema.Union(
  envelope("clicks.recorded", Schema.declare(isAccountClickColumns, { identifier: "AccountClickColumns" }), 3),
  envelope("clicks.recorded", Schema.declare(isClickColumns, { identifier: "LinkClickColumns" }), 2),
  envelope(
    "clicks.recorded",
    Schema.Struct({
      link_id: Schema.String,
      clicks: Schema.declare(isClickList, { identifier: "BatchedClicks" })
    })
  ),
  ClickRecorded
)
