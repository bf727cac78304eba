import { randomBytes } from "node:crypto"
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

/**
 * A record's fixed part, in bytes: two times (float64 at 0 and 8), then four int32 fields;
 * the path's bytes follow it, then the Location's. Records start at multiples of 8.
 */
const HEAD = 32
/** Float64 fields (from the record's offset / 8). */
const EXPIRES_AT = 0
const UPDATED_AT = 1
/** Int32 fields (from the record's offset / 4). */
const LINK = 4
const PATH_LENGTH = 5
const LOCATION_LENGTH = 6
/** Bytes the record has for a Location: an update that fits is written in place. */
const LOCATION_ROOM = 7
/** A record that does not redirect keeps its version with this expiry: every time is after it. */
const NO_REDIRECT = Number.NEGATIVE_INFINITY
/** The longest path a record holds: "/" and a slug of at most 32 characters, with room to spare. */
const MAX_PATH = 255
/** The arena's first size; it doubles when full, and is compacted when half of it is moved records. */
const INITIAL_BYTES = 1 << 16
const INITIAL_SLOTS = 1 << 10
/** Bytes of moved records (older versions of a grown Location) worth a compaction. */
const COMPACT_AFTER = 16 << 20

/** Arena bytes a reservation gives each path: a record with a Location of ~60 characters. */
const RESERVE_BYTES_PER_PATH = 128
/** Paths and arena bytes a reservation asks for at most: a wrong estimate must not ask for gigabytes. */
const MAX_RESERVE = 1 << 24
const MAX_RESERVE_BYTES = 1 << 30

const align8 = (n: number) => (n + 7) & ~7

/** FNV-1a over a path's characters (seeded per table), then its high bits mixed into the low ones, which pick the slot. */
const FNV_PRIME = 0x01000193
const finishHash = (h: number) => {
  h ^= h >>> 16
  h = Math.imul(h, 0x45d9f3b)
  return h ^ (h >>> 16)
}
/** Puts a record (its path's hash, its offset / 8) in the first empty slot of its run. */
const place = (slots: Int32Array, mask: number, h: number, word: number) => {
  let i = h & mask
  while (slots[i * 2 + 1] !== 0) i = (i + 1) & mask
  slots[i * 2] = h
  slots[i * 2 + 1] = word
}

/** The link number of a record that was moved: garbage until the next compaction. */
const MOVED = -1

/** A path of visible ASCII no longer than MAX_PATH: what a request line can name byte for byte. */
const storablePath = (path: string) => path.length <= MAX_PATH && /^[\x21-\x7e]+$/.test(path)

/**
 * The redirector's in-memory projection of links.v1: request path ("/" + slug) to what a
 * redirect needs, for a million links and more, laid out so that a random lookup touches as
 * few cache lines as it can (a million links do not fit in any cache, so every line is a
 * miss: bench/slug-table-lookup.ts).
 *
 * - Each path has one **record** in one arena of bytes: its expiry and version, its link's
 *   number, the path's bytes and the Location's bytes, side by side. A lookup reads one slot of
 *   the hash index and then the record, usually one or two cache lines; the redirect's
 *   Location is a view of the record's bytes (uWebSockets.js copies it from there).
 * - The **index** is open addressing with linear probing over an Int32Array of slots, each a
 *   path's hash and its record's offset: a probe compares the hash before it reads a record.
 *   The hash is seeded per process: which slots slugs land in is not known outside it, so
 *   nobody can pick custom slugs that pile up in one run of slots.
 * - The link and account ids, which only click capture reads, are strings by link number.
 *
 * A link's slug never changes (UpdateLink takes the URL alone, options are UTM and expiry)
 * and links are disabled, never erased, so a path names one link for good: a record is never
 * removed from the index, and a link's number is never given to another link. A link that
 * does not redirect (disabled, a reserved slug, a destination that is not http(s)) keeps its
 * record as a tombstone with its version (`updatedAt`): a late event with an older state
 * (replayed after the database load already had a newer one) changes nothing, for a disabled
 * link too. An update whose Location does not fit in its record's room moves the record to the
 * arena's end; the arena is compacted once the moved records' bytes are worth it (a copy of
 * the records in use: about a quarter of a second per million links, once per that many bytes
 * of moved records).
 */
export class SlugTable {
  private buffer = new ArrayBuffer(INITIAL_BYTES)
  private bytes = Buffer.from(this.buffer)
  private f64 = new Float64Array(this.buffer)
  private i32 = new Int32Array(this.buffer)
  /** Bytes of the arena in use (records, moved ones included); 0 is never a record's offset. */
  private used = 8
  /** Bytes of records that were moved: garbage until the next compaction. */
  private moved = 0
  /** Per slot two int32: the path's hash and its record's offset / 8 (0: an empty slot). */
  private slots = new Int32Array(INITIAL_SLOTS * 2)
  private mask = INITIAL_SLOTS - 1
  private readonly seed = randomBytes(4).readInt32LE(0) | 1
  /**
   * By link number n: the link's id at 2n and its account's id at 2n + 1 (one cache line for
   * both; undefined while the link does not redirect).
   */
  private readonly ids: Array<string | undefined> = []
  /** One copy of each account's id: every row and event brings its own. */
  private readonly accounts = new Map<string, string>()
  private lastAccount = ""
  /** Links that redirect. */
  size = 0
  /** Set once the database load has finished. */
  ready = false

  /** `compactAfterBytes`: moved records' bytes worth a compaction (default 16 MiB; tests use less). */
  constructor(private readonly compactAfterBytes = COMPACT_AFTER) {}

  private hash(path: string): number {
    let h = this.seed
    for (let i = 0; i < path.length; i++) h = Math.imul(h ^ path.charCodeAt(i), FNV_PRIME)
    return finishHash(h)
  }

  /** `hash` of the path a record holds, from its bytes (the same characters: visible ASCII). */
  private hashOfRecord(at: number): number {
    const bytes = this.bytes
    const end = at + HEAD + this.i32[(at >>> 2) + PATH_LENGTH]!
    let h = this.seed
    for (let i = at + HEAD; i < end; i++) h = Math.imul(h ^ bytes[i]!, FNV_PRIME)
    return finishHash(h)
  }

  /** The offset of `path`'s record (a tombstone's too), or -1. */
  private find(path: string, h: number): number {
    const slots = this.slots
    const bytes = this.bytes
    const n = path.length
    let i = h & this.mask
    for (;;) {
      const word = slots[i * 2 + 1]!
      if (word === 0) return -1
      if (slots[i * 2] === h) {
        const at = word * 8
        if (this.i32[(at >>> 2) + PATH_LENGTH] === n) {
          let c = 0
          while (c < n && bytes[at + HEAD + c] === path.charCodeAt(c)) c++
          if (c === n) return at
        }
      }
      i = (i + 1) & this.mask
    }
  }

  /**
   * The record of the link at `path` if it redirects, else -1: the request path's one lookup.
   * What it gives is read through `location`, `linkId`, `accountId` and `expiresAt`, at once
   * (an update may move the record).
   */
  rowOf(path: string): number {
    if (path.length > MAX_PATH) return -1
    const at = this.find(path, this.hash(path))
    return at < 0 || this.f64[at >>> 3] === NO_REDIRECT ? -1 : at
  }

  /**
   * The Location header of a record, as bytes (the destination with UTM merged, visible
   * ASCII only): a view of the arena, valid until the table changes.
   */
  location(row: number): Uint8Array {
    const i = row >>> 2
    return new Uint8Array(this.buffer, row + HEAD + this.i32[i + PATH_LENGTH]!, this.i32[i + LOCATION_LENGTH]!)
  }

  linkId(row: number): string {
    return this.ids[this.i32[(row >>> 2) + LINK]! * 2]!
  }

  accountId(row: number): string {
    return this.ids[this.i32[(row >>> 2) + LINK]! * 2 + 1]!
  }

  /** ms since the epoch after which the record's link answers 404; Infinity when it never expires. */
  expiresAt(row: number): number {
    return this.f64[(row >>> 3) + EXPIRES_AT]!
  }

  has(path: string): boolean {
    return this.rowOf(path) >= 0
  }

  /** A copy of what the table holds for `path` (allocates: not for the request path). */
  entryOf(path: string): SlugEntry | undefined {
    const row = this.rowOf(path)
    if (row < 0) return undefined
    return {
      location: Buffer.from(this.location(row)).toString("latin1"),
      linkId: this.linkId(row),
      accountId: this.accountId(row),
      expiresAt: this.expiresAt(row)
    }
  }

  /** Paths the table holds a record for, tombstones included. */
  get rowCount(): number {
    return this.ids.length / 2
  }

  /**
   * Room for `paths` paths before the index grows, and `bytesPerPath` of arena each before it
   * does: a load that knows its size roughly copies nothing as it goes. Pages of the arena not
   * yet written take no memory, so a generous guess costs little.
   */
  reserve(paths: number, bytesPerPath = RESERVE_BYTES_PER_PATH) {
    const n = Math.min(Math.max(0, Math.floor(paths)), MAX_RESERVE)
    if (this.mask + 1 < 2 * n) this.growIndex(2 ** Math.ceil(Math.log2(2 * n)))
    const bytes = Math.min(align8(n * bytesPerPath), MAX_RESERVE_BYTES)
    if (bytes > this.buffer.byteLength) this.resize(bytes)
  }

  /** Bytes of the arena in use, moved records included (bench/slug-table-updates.ts, tests). */
  get arenaBytes(): number {
    return this.used
  }

  /**
   * Applies a state unless the table holds a newer one; says whether it applied. A slug that
   * is not visible ASCII can never match a request path byte for byte: it is not held.
   */
  apply(state: LinkState): boolean {
    const path = `/${state.slug}`
    if (!storablePath(path)) return false
    const h = this.hash(path)
    let at = this.find(path, h)
    if (at >= 0 && state.updatedAt < this.f64[(at >>> 3) + UPDATED_AT]!) return false
    // Reserved slugs (healthz, readyz, …) are the short host's own paths: never a redirect,
    // even for a row written before its slug was reserved. Checked here, not per request.
    const location =
      state.active && !isReservedSlug(state.slug) ? prepareLocation(state.destinationUrl, state.utm) : null
    const room = location?.length ?? 0
    let link: number
    if (at < 0) {
      link = this.ids.length / 2
      this.ids.push(undefined, undefined)
      at = this.insert(path, h, link, room)
    } else {
      link = this.i32[(at >>> 2) + LINK]!
      if (this.f64[at >>> 3] !== NO_REDIRECT) this.size--
      if (room > this.i32[(at >>> 2) + LOCATION_ROOM]!) at = this.move(path, h, at, room)
    }
    const i = at >>> 2
    this.f64[(at >>> 3) + UPDATED_AT] = state.updatedAt
    if (location === null) {
      this.f64[(at >>> 3) + EXPIRES_AT] = NO_REDIRECT
      this.i32[i + LOCATION_LENGTH] = 0
      this.ids[link * 2] = undefined
      this.ids[link * 2 + 1] = undefined
      return true
    }
    this.bytes.write(location, at + HEAD + this.i32[i + PATH_LENGTH]!, "latin1")
    this.i32[i + LOCATION_LENGTH] = location.length
    this.f64[(at >>> 3) + EXPIRES_AT] = state.expiresAt ?? Number.POSITIVE_INFINITY
    this.ids[link * 2] = state.id
    this.ids[link * 2 + 1] = this.account(state.accountId)
    this.size++
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

  /** A new record for `path` at the arena's end, in the index. */
  private insert(path: string, h: number, link: number, room: number): number {
    // Called after the path's ids were pushed: ids.length / 2 counts it already.
    if (this.ids.length > this.mask + 1) this.growIndex()
    const at = this.allocate(path, link, room)
    place(this.slots, this.mask, h, at / 8)
    return at
  }

  /** The record at `from` again at the arena's end with more room; the index points there. */
  private move(path: string, h: number, from: number, room: number): number {
    // A resize keeps every offset, so `from` still holds the record after `allocate`.
    const to = this.allocate(path, this.i32[(from >>> 2) + LINK]!, room)
    this.moved += this.recordBytes(from)
    this.i32[(from >>> 2) + LINK] = MOVED
    this.pointTo(h, from, to)
    if (this.moved >= this.compactAfterBytes && this.moved * 2 >= this.used) return this.compact(to)
    return to
  }

  private recordBytes(at: number): number {
    const i = at >>> 2
    return align8(HEAD + this.i32[i + PATH_LENGTH]! + this.i32[i + LOCATION_ROOM]!)
  }

  /** The slot that points at the record at `from` points at `to`. */
  private pointTo(h: number, from: number, to: number) {
    let i = h & this.mask
    while (this.slots[i * 2 + 1] !== from / 8) i = (i + 1) & this.mask
    this.slots[i * 2 + 1] = to / 8
  }

  /** Space for a record at the arena's end, its fixed part and path written. */
  private allocate(path: string, link: number, room: number): number {
    const size = align8(HEAD + path.length + room)
    if (this.used + size > this.buffer.byteLength) this.resize(Math.max(this.buffer.byteLength * 2, this.used + size))
    const at = this.used
    this.used += size
    const i = at >>> 2
    this.f64[(at >>> 3) + EXPIRES_AT] = NO_REDIRECT
    this.i32[i + LINK] = link
    this.i32[i + PATH_LENGTH] = path.length
    this.i32[i + LOCATION_LENGTH] = 0
    this.i32[i + LOCATION_ROOM] = room
    this.bytes.write(path, at + HEAD, "latin1")
    return at
  }

  /** A new arena of `bytes`, with the records in use copied to the same offsets. */
  private resize(bytes: number) {
    const buffer = new ArrayBuffer(align8(bytes))
    new Uint8Array(buffer).set(new Uint8Array(this.buffer, 0, this.used))
    this.adopt(buffer)
  }

  private adopt(buffer: ArrayBuffer) {
    this.buffer = buffer
    this.bytes = Buffer.from(buffer)
    this.f64 = new Float64Array(buffer)
    this.i32 = new Int32Array(buffer)
  }

  /** Twice the slots (or `slots`), every record indexed again (by the hash its slot kept). */
  private growIndex(slots = (this.mask + 1) << 1) {
    const old = this.slots
    this.slots = new Int32Array(slots * 2)
    this.mask = this.slots.length / 2 - 1
    for (let j = 0; j < old.length; j += 2) {
      if (old[j + 1] !== 0) place(this.slots, this.mask, old[j]!, old[j + 1]!)
    }
  }

  /**
   * The records in use into a new arena, in the order they have, and a new index over them
   * (one pass over the arena, whose reads come in order; the index, smaller, takes the random
   * ones); says where the record at `at` went.
   */
  private compact(at: number): number {
    const live = this.used - this.moved
    const buffer = new ArrayBuffer(align8(Math.max(INITIAL_BYTES, live + (live >> 1))))
    // Copied as int32 words (records are 8-aligned): no view allocated per record.
    const to = new Int32Array(buffer)
    const i32 = this.i32
    const slots = new Int32Array(this.slots.length)
    let used = 8
    let moved = -1
    for (let from = 8, size = 0; from < this.used; from += size) {
      size = this.recordBytes(from)
      if (i32[(from >>> 2) + LINK] === MOVED) continue
      for (let k = 0, a = from >>> 2, b = used >>> 2, n = size >>> 2; k < n; k++) to[b + k] = i32[a + k]!
      place(slots, this.mask, this.hashOfRecord(from), used / 8)
      if (from === at) moved = used
      used += size
    }
    this.adopt(buffer)
    this.slots = slots
    this.used = used
    this.moved = 0
    return moved
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
  Effect.gen(function* () {
    const links = yield* LinkRepo
    table.reserve(yield* links.estimatedCount)
    return yield* links.forEachSnapshot(LOAD_BATCH, (rows) =>
      Effect.sync(() => {
        for (const row of rows) table.apply(row)
      })
    )
  })

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
