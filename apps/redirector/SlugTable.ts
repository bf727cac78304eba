import { Effect } from "effect"
import { EventLog } from "../../domain/EventLog.js"
import { LinkEvent, Topics } from "../../domain/Events.js"
import { isReservedSlug, type Link } from "../../domain/Link.js"
import { LinkRepo } from "../../domain/ports/LinkRepo.js"
import { prepareLocation } from "./Location.js"

/**
 * What a redirect needs of one link, copied out of the table by `SlugTable.entryOf` (tests,
 * tools). The request path reads the table's columns instead and allocates nothing.
 */
export interface SlugEntry {
  /** The Location header: destination with UTM merged, visible ASCII only. */
  readonly location: string
  readonly linkId: string
  readonly accountId: string
  /** ms since the epoch after which the link answers 404; Infinity when it never expires. */
  readonly expiresAt: number
}

/** A link's whole state, as both the links table and every links.v1 event carry it. */
export interface LinkState {
  readonly id: string
  readonly accountId: string
  readonly slug: string
  readonly destinationUrl: string
  readonly active: boolean
  readonly utm: Readonly<Record<string, string>> | null
  /** ms since the epoch, or null. */
  readonly expiresAt: number | null
  /** ms since the epoch: the version of this state. */
  readonly updatedAt: number
}

/** Rows the tables start with; they double when full. */
const INITIAL_ROWS = 1024
/** A row's strings, side by side in `strings` (one cache line for the request path). */
const LOCATION = 0
const LINK_ID = 1
const ACCOUNT_ID = 2
const STRINGS = 3
/** A row's times, side by side in `times`. */
const EXPIRES_AT = 0
const UPDATED_AT = 1
const TIMES = 2

const widen = (a: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> => {
  const b = new Float64Array(a.length * 2)
  b.set(a)
  return b
}

/** A link that does not redirect keeps only its version, in the map, as a negative number. */
const tombstone = (updatedAt: number) => -1 - Math.max(0, updatedAt)
const versionOfTombstone = (value: number) => -1 - value

/**
 * The redirector's in-memory projection of links.v1: request path ("/" + slug) to what a
 * redirect needs, for a million links and more. One map, path to a row number, and the rows
 * in two flat tables, a row's strings side by side and its times side by side (no object per
 * link, each string once): the path is the only copy of the slug, an account's id is held
 * once for all its links.
 *
 * A link's slug never changes (UpdateLink takes the URL alone, options are UTM and expiry)
 * and links are disabled, never erased, so a path names one link for good and the table
 * needs no map by link id. A link that does not redirect (disabled, a reserved slug, a
 * destination that is not http(s)) gives its row back and leaves a tombstone in the map with
 * its `updatedAt`: a late event with an older state (replayed after the database load already
 * had a newer one) changes nothing, for a disabled link too.
 */
export class SlugTable {
  /** Path to row (>= 0), or to a tombstone (< 0, see `tombstone`). Read through `rowOf`. */
  readonly rows = new Map<string, number>()
  /** Per row, STRINGS of them: the Location header, the link's id, its account's id. */
  private readonly strings: Array<string | undefined> = []
  /** Per row, TIMES of them (ms since the epoch): expiry (Infinity: never), the state's version. */
  private times = new Float64Array(INITIAL_ROWS * TIMES)
  /** Rows given back (their link stopped redirecting), taken again before new ones. */
  private readonly free: Array<number> = []
  /** One copy of each account's id: every row and event brings its own. */
  private readonly accounts = new Map<string, string>()
  private lastAccount = ""
  /** Links that redirect. */
  size = 0
  /** Set once the database load has finished. */
  ready = false

  /** The row of the link at `path` if it redirects, else -1. The request path's one lookup. */
  rowOf(path: string): number {
    const row = this.rows.get(path)
    return row === undefined || row < 0 ? -1 : row
  }

  /** The Location header of a row: destination with UTM merged, visible ASCII only. */
  location(row: number): string {
    return this.strings[row * STRINGS + LOCATION]!
  }

  linkId(row: number): string {
    return this.strings[row * STRINGS + LINK_ID]!
  }

  accountId(row: number): string {
    return this.strings[row * STRINGS + ACCOUNT_ID]!
  }

  /** ms since the epoch after which the row's link answers 404; Infinity when it never expires. */
  expiresAt(row: number): number {
    return this.times[row * TIMES + EXPIRES_AT]!
  }

  has(path: string): boolean {
    return this.rowOf(path) >= 0
  }

  /** A copy of what the table holds for `path` (allocates: not for the request path). */
  entryOf(path: string): SlugEntry | undefined {
    const row = this.rowOf(path)
    if (row < 0) return undefined
    return {
      location: this.location(row),
      linkId: this.linkId(row),
      accountId: this.accountId(row),
      expiresAt: this.expiresAt(row)
    }
  }

  /** Rows in use or free: what the tables hold. */
  get rowCount(): number {
    return this.strings.length / STRINGS
  }

  /** Applies a state unless the table holds a newer one; says whether it applied. */
  apply(state: LinkState): boolean {
    const path = `/${state.slug}`
    const held = this.rows.get(path)
    const version =
      held === undefined ? 0 : held >= 0 ? this.times[held * TIMES + UPDATED_AT]! : versionOfTombstone(held)
    if (held !== undefined && state.updatedAt < version) return false
    // Reserved slugs (healthz, readyz, …) are the short host's own paths: never a redirect,
    // even for a row written before its slug was reserved. Checked here, not per request.
    const location =
      state.active && !isReservedSlug(state.slug) ? prepareLocation(state.destinationUrl, state.utm) : null
    if (location === null) {
      if (held !== undefined && held >= 0) this.release(held)
      this.rows.set(path, tombstone(state.updatedAt))
      return true
    }
    const row = held !== undefined && held >= 0 ? held : this.take()
    // In this order: a new row's strings are appended, the array stays without holes.
    const at = row * STRINGS
    this.strings[at + LOCATION] = location
    this.strings[at + LINK_ID] = state.id
    this.strings[at + ACCOUNT_ID] = this.account(state.accountId)
    this.times[row * TIMES + EXPIRES_AT] = state.expiresAt ?? Number.POSITIVE_INFINITY
    this.times[row * TIMES + UPDATED_AT] = state.updatedAt
    if (row !== held) {
      this.rows.set(path, row)
      this.size++
    }
    return true
  }

  private account(id: string): string {
    // Rows come account by account more often than not: one comparison, no hashing.
    if (id === this.lastAccount) return this.lastAccount
    let held = this.accounts.get(id)
    if (held === undefined) {
      held = id
      this.accounts.set(id, id)
    }
    this.lastAccount = held
    return held
  }

  /** A free row, or a new one at the end (the strings grow as arrays do, the times double). */
  private take(): number {
    const reused = this.free.pop()
    if (reused !== undefined) return reused
    const row = this.strings.length / STRINGS
    if ((row + 1) * TIMES > this.times.length) this.times = widen(this.times)
    return row
  }

  private release(row: number) {
    this.strings.fill(undefined, row * STRINGS, (row + 1) * STRINGS)
    this.free.push(row)
    this.size--
  }
}

const parseTime = (iso: string | null): number | null => {
  if (iso === null) return null
  const ms = Date.parse(iso)
  return Number.isNaN(ms) ? null : ms
}

/** The state a links.v1 event carries. */
export const stateOfEvent = (event: LinkEvent): LinkState => ({
  id: event.data.id,
  accountId: event.account_id,
  slug: event.data.slug,
  destinationUrl: event.data.destination_url,
  active: event.data.publication_status === "active",
  utm: event.data.utm,
  expiresAt: parseTime(event.data.expires_at),
  updatedAt: parseTime(event.data.updated_at) ?? 0
})

/** The state of a stored link. Events carry milliseconds: Date has the same precision. */
export const stateOfLink = (link: Link): LinkState => ({
  id: link.id,
  accountId: link.accountId,
  slug: link.slug,
  destinationUrl: link.destinationUrl,
  active: link.status === "active",
  utm: link.utm,
  expiresAt: link.expiresAt === null ? null : link.expiresAt.getTime(),
  updatedAt: link.updatedAt.getTime()
})

/** Rows per FETCH of the load's cursor. */
const LOAD_BATCH = 10_000

/**
 * Every stored link, through one server-side cursor in batches, so memory stays flat while
 * loading (a million links: one batch of rows at a time beside the table).
 */
export const loadLinks = (table: SlugTable) =>
  Effect.flatMap(LinkRepo, (links) =>
    links.forEachSnapshot(LOAD_BATCH, (rows) =>
      Effect.sync(() => {
        for (const row of rows) table.apply(row)
      })
    )
  )

/**
 * Fills the table so that no change is missed: the log's end offsets first, then every link
 * from the database, then the log from those offsets on. A change committed during the load is
 * both in the rows and in the log after the offsets; the version check keeps the newer one.
 * Ready once the load is done; following then runs until the scope closes.
 */
export const startSlugTable = (table: SlugTable) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const offsets = yield* log.endOffsets(Topics.links)
    const started = Date.now()
    const cpu = process.cpuUsage()
    const loaded = yield* loadLinks(table)
    table.ready = true
    const used = process.cpuUsage(cpu)
    const rssMb = Math.round(process.memoryUsage.rss() / 1048576)
    // The CPU time too: on a shared machine the wall time says more about the neighbours.
    yield* Effect.logInfo(
      `slug table loaded: ${loaded} links (${table.size} active) in ${Date.now() - started} ms ` +
        `(cpu ${Math.round((used.user + used.system) / 1000)} ms), rss ${rssMb} MB`
    )
    yield* log.follow({ topic: Topics.links, startAt: { _tag: "Offsets", offsets } }, LinkEvent, (batch) =>
      Effect.sync(() => {
        for (const { event } of batch.events) table.apply(stateOfEvent(event))
      })
    )
  })
