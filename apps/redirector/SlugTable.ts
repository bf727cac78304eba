import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { EventLog } from "../../domain/EventLog.js"
import { LinkEvent, Topics } from "../../domain/Events.js"
import { isReservedSlug, type Link } from "../../domain/Link.js"
import { LinkRepo, type LinkSnapshot } from "../../domain/ports/LinkRepo.js"
import { hugePagesOf } from "../../infra/Processes.js"
import { copyBytes, viewOf } from "./Bytes.js"
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

/** A link's whole state, as both the links table (LinkRepo's snapshots) and every links.v1 event carry it. */
export type LinkState = LinkSnapshot

/**
 * A bucket: one record in 128 bytes, at a position its path's hash gives. Its fixed part: the
 * expiry (float64 at 0), the link's number (int32 at 8) and its account's (int32 at 12), the
 * lengths of path and link id (a byte each, at 16 and 17), where the bytes are (18), and the
 * Location's length (int32 at 20). From 24 on, the path's bytes, the link id's and the
 * Location's, when they fit; when not, the same bytes are in the arena, at ARENA_AT * 8, with
 * ROOM bytes (both int32, at 24 and 28).
 */
const BUCKET = 128
/** Float64 field (from the bucket's offset / 8). */
const EXPIRES_AT = 0
/** Int32 fields (from the bucket's offset / 4). */
const LINK = 2
const ACCOUNT = 3
const LOCATION_LENGTH = 5
const ARENA_AT = 6
const ROOM = 7
/** Byte fields (from the bucket's offset). */
const PATH_LENGTH = 16
const ID_LENGTH = 17
const KIND = 18
/** KIND: the bytes are in the bucket from DATA on, or in the arena. */
const INLINE = 1
const IN_ARENA = 2
const DATA = 24
/**
 * Where bucket 0 starts in its buffer. glibc puts a large allocation (an ArrayBuffer's bytes)
 * 16 bytes past a page boundary, so from 112 on every bucket is one aligned pair of cache
 * lines, which the CPU fetches together (elsewhere a bucket takes one line more; nothing else).
 */
const BASE = 112
/** Paths per bucket at most: probe runs stay short, and the tags (one byte a bucket) say where to look. */
const MAX_LOAD = 0.75
const INITIAL_BUCKETS = 1 << 10
/** How much the buckets grow past MAX_LOAD: used buckets stay between a half and three quarters. */
const GROWTH = 1.5
/** Buckets at most: a row is an offset below 2^32 (`>>>` reads it unsigned). That is 25 million paths. */
const MAX_BUCKETS = 2 ** 25 - 1
/** A record that does not redirect keeps its version with this expiry: every time is after it. */
const NO_REDIRECT = Number.NEGATIVE_INFINITY
/** The longest path a record holds: "/" and a slug of at most 32 characters, with room to spare. */
const MAX_PATH = 255
/** The arena's first size; it doubles when full, and is compacted when half of it is records that moved on. */
const INITIAL_ARENA = 1 << 12
/** Bytes of records that moved on (a longer Location elsewhere) worth a compaction. */
const COMPACT_AFTER = 16 << 20
/** Buckets a reservation asks for at most (1 GiB of them): a wrong estimate must not ask for more. */
const MAX_RESERVE_BUCKETS = (1 << 30) / BUCKET

const align8 = (n: number) => (n + 7) & ~7

/** Where the tags start in the buffer of `capacity` buckets: after the buckets (in their huge pages). */
const tagsAt = (capacity: number) => BASE + capacity * BUCKET
/** The buffer of `capacity` buckets: the buckets, then their tags. */
const tableOf = (capacity: number) => new ArrayBuffer(tagsAt(capacity) + align8(capacity))

/** FNV-1a over a path's characters (seeded per table), then its high bits mixed into the low ones. */
const FNV_PRIME = 0x01000193
const finishHash = (h: number) => {
  h ^= h >>> 16
  h = Math.imul(h, 0x45d9f3b)
  return h ^ (h >>> 16)
}
/** `s` (one byte a character) at `at` in `bytes`: where it ends. */
const put = (bytes: Uint8Array, at: number, s: string) => {
  for (let k = 0; k < s.length; k++) bytes[at + k] = s.charCodeAt(k)
  return at + s.length
}
/** A bucket's tag: 7 bits of its path's hash that do not choose the bucket, and a set high bit (0: empty). */
const tagOf = (h: number) => (h & 0x7f) | 0x80

/** Visible ASCII, 1 to `max` characters: what the table holds byte for byte (one byte a character). */
const visibleAscii = (s: string, max: number) => s.length <= max && /^[\x21-\x7e]+$/.test(s)

/** A path a request line can name byte for byte. */
const storablePath = (path: string) => visibleAscii(path, MAX_PATH)

/** The longest link or account id the table holds (ids are a prefix and 22 base62 characters). */
const MAX_ID = 255
/** Ids of visible ASCII no longer than MAX_ID: what a click's run entry carries byte for byte (ClickRound.ts). */
export const storableId = (id: string) => visibleAscii(id, MAX_ID)

/** Bytes of a run entry (`SlugTable.writeRun`) at most: the two ids with their lengths. */
export const MAX_RUN_ENTRY = 8 + 2 * MAX_ID

/**
 * The redirector's in-memory projection of links.v1: request path ("/" + slug) to what a
 * redirect needs, for a million links and more, laid out so that a random lookup misses the
 * cache once (a million links fit in no cache: bench/slug-table-lookup.ts).
 *
 * - Each path has one **bucket** of 128 bytes, at the position its hash gives (open
 *   addressing, linear probing): its expiry, its link's number and its account's, and the
 *   path's bytes, the link id's and the Location's side by side. The bucket is the record: a
 *   lookup reads no index first, and the Location it answers with (a view that uWebSockets.js
 *   copies) and the link id that click capture copies (`writeRun`) are in the same two cache
 *   lines. A record whose bytes do not fit (a long Location) keeps them in the **arena**, one
 *   miss more.
 * - One **tag** byte a bucket (7 bits of the hash) says which buckets to look at: the tags,
 *   a byte a path, stay in the cache, so a probe past other paths costs no miss, and a bucket
 *   is read when its tag matches (a wrong match: 1 in 128). They follow the buckets in the
 *   same allocation, so in its huge pages too (scripts/redirector.sh): a million links' 1.3 MB
 *   of tags on their own are too few for one, and their random read walked the page tables
 *   more often (a random lookup ~4% dearer: docs/redirect-tier.md).
 * - The hash is seeded per process: which buckets slugs land in is not known outside it, so
 *   nobody can pick custom slugs that pile up in one run of buckets.
 * - Account ids, few, are strings (and bytes) by account number; the versions, read by
 *   updates only, are by link number, out of the buckets.
 *
 * A link's slug never changes (UpdateLink takes the URL alone, options are UTM and expiry)
 * and links are disabled, never erased, so a path names one link for good: a bucket is never
 * emptied, and a link's number is never given to another link. A link that does not redirect
 * (disabled, a reserved slug, a destination that is not http(s)) keeps its bucket as a
 * tombstone with its version: a late event with an older state (replayed after the database
 * load already had a newer one) changes nothing, for a disabled link too. An update is written
 * in place; a Location that no longer fits where it was goes to the arena's end, which is
 * compacted once the records left behind are worth it. Past MAX_LOAD the buckets grow by half,
 * each record placed again (a pause of ~0.2 s per million links: the load sizes them first).
 */
export class SlugTable {
  private capacity = INITIAL_BUCKETS
  /** Bucket position of a hash: its high bits scaled to the capacity (any capacity, not only powers of 2). */
  private scale = INITIAL_BUCKETS / 2 ** 32
  private buffer = tableOf(INITIAL_BUCKETS)
  private tags = new Uint8Array(this.buffer, tagsAt(INITIAL_BUCKETS), INITIAL_BUCKETS)
  private bytes = Buffer.from(this.buffer)
  private f64 = new Float64Array(this.buffer)
  private i32 = new Int32Array(this.buffer)
  /** The buckets' bytes again, to copy run entries with (`writeRun`). */
  private view = new DataView(this.buffer)
  /** The arena: records' bytes that do not fit in their bucket. 0 is never an offset. */
  private arena = Buffer.alloc(INITIAL_ARENA)
  private arenaView = viewOf(this.arena)
  /** Bytes of the arena in use (records left behind included). */
  private used = 8
  /** Bytes of the arena left behind by records that moved on: garbage until the next compaction. */
  private moved = 0
  /** By link number: the version (updatedAt) of the state its bucket holds. */
  private versions = new Float64Array(INITIAL_BUCKETS)
  private readonly seed = randomBytes(4).readInt32LE(0) | 1
  /** Link numbers given so far (a record's link number is never another link's). */
  private links = 0
  /** Paths with a bucket. */
  private paths = 0
  /** By account number: the account's id (one copy, whatever the rows bring). */
  private readonly accountIds: Array<string> = []
  /** By account number: its part of a run entry (`writeRun`), the u32 length and bytes of its id. */
  private readonly accountEntries: Array<DataView> = []
  private readonly accounts = new Map<string, number>()
  private lastAccount = ""
  private lastAccountNumber = -1
  /** Links that redirect. */
  size = 0
  /** Set once the database load has finished. */
  ready = false

  /** `compactAfterBytes`: arena bytes left behind worth a compaction (default 16 MiB; tests use less). */
  constructor(private readonly compactAfterBytes = COMPACT_AFTER) {}

  private hash(path: string): number {
    let h = this.seed
    for (let i = 0; i < path.length; i++) h = Math.imul(h ^ path.charCodeAt(i), FNV_PRIME)
    return finishHash(h)
  }

  /** `hash` of a path from its bytes (the same characters: visible ASCII). */
  private hashOfBytes(bytes: Uint8Array, from: number, n: number): number {
    let h = this.seed
    for (let i = from; i < from + n; i++) h = Math.imul(h ^ bytes[i]!, FNV_PRIME)
    return finishHash(h)
  }

  /** The bucket the hash `h` is placed from. */
  private home(h: number): number {
    return ((h >>> 0) * this.scale) | 0
  }

  /** The row (bucket offset) of `path`'s record (a tombstone's too), or -1. */
  private find(path: string, h: number): number {
    const tags = this.tags
    const bytes = this.bytes
    const tag = tagOf(h)
    const n = path.length
    let i = this.home(h)
    for (;;) {
      const t = tags[i]!
      if (t === 0) return -1
      if (t === tag) {
        const row = BASE + i * BUCKET
        if (bytes[row + PATH_LENGTH] === n) {
          const source = this.bytesOf(row)
          const from = this.pathAt(row)
          let c = 0
          while (c < n && source[from + c] === path.charCodeAt(c)) c++
          if (c === n) return row
        }
      }
      if (++i === this.capacity) i = 0
    }
  }

  /**
   * The record of the link at `path` if it redirects, else -1: the request path's one lookup.
   * What it gives is read through `location`, `linkId`, `accountId` and `expiresAt`, at once
   * (a change to the table may move the record).
   */
  rowOf(path: string): number {
    if (path.length > MAX_PATH) return -1
    const row = this.find(path, this.hash(path))
    return row < 0 || this.f64[row >>> 3] === NO_REDIRECT ? -1 : row
  }

  /** The bytes a row's path, link id and Location are in: its bucket's buffer or the arena. */
  private bytesOf(row: number): Buffer {
    return this.bytes[row + KIND] === INLINE ? this.bytes : this.arena
  }

  /** `bytesOf(row)` as a DataView. */
  private viewAt(row: number): DataView {
    return this.bytes[row + KIND] === INLINE ? this.view : this.arenaView
  }

  /** Where, in `bytesOf(row)`, the row's path starts; its link id and Location follow. */
  private pathAt(row: number): number {
    return this.bytes[row + KIND] === INLINE ? row + DATA : this.i32[(row >>> 2) + ARENA_AT]! * 8
  }

  /** Where, in `bytesOf(row)`, the row's link id starts (its length: ID_LENGTH). */
  private linkIdAt(row: number): number {
    return this.pathAt(row) + this.bytes[row + PATH_LENGTH]!
  }

  /**
   * The Location header of a record, as bytes (the destination with UTM merged, visible
   * ASCII only): a view of the table's memory, valid until the table changes.
   */
  location(row: number): Uint8Array {
    const bytes = this.bytes
    const skip = bytes[row + PATH_LENGTH]! + bytes[row + ID_LENGTH]!
    const length = this.i32[(row >>> 2) + LOCATION_LENGTH]!
    if (bytes[row + KIND] === INLINE) return new Uint8Array(this.buffer, row + DATA + skip, length)
    const arena = this.arena
    return new Uint8Array(arena.buffer, arena.byteOffset + this.i32[(row >>> 2) + ARENA_AT]! * 8 + skip, length)
  }

  /** The record's link number: no other link of this table ever has it. */
  linkNumber(row: number): number {
    return this.i32[(row >>> 2) + LINK]!
  }

  /** The record's link id (a new string: not for the request path, which copies bytes with `writeRun`). */
  linkId(row: number): string {
    const from = this.linkIdAt(row)
    return this.bytesOf(row).toString("latin1", from, from + this.bytes[row + ID_LENGTH]!)
  }

  /** The record's account id (the table's one string for that account). */
  accountId(row: number): string {
    return this.accountIds[this.i32[(row >>> 2) + ACCOUNT]!]!
  }

  /**
   * The record's run entry at `at` in `out` (room for MAX_RUN_ENTRY bytes): the u32 length and
   * bytes of the link id, then of the account id, as the crash spool keeps them
   * (ClickSpool.ts); says where it ends. Copied from the bucket, whose lines the lookup has
   * just read, four bytes at a time (ids are short: less than a call), allocating nothing.
   */
  writeRun(row: number, out: DataView, at: number): number {
    const n = this.bytes[row + ID_LENGTH]!
    out.setUint32(at, n, true)
    copyBytes(this.viewAt(row), this.linkIdAt(row), out, at + 4, n)
    at += 4 + n
    // The account's entry as it is, its length included.
    const account = this.accountEntries[this.i32[(row >>> 2) + ACCOUNT]!]!
    const m = account.byteLength
    copyBytes(account, 0, out, at, m)
    return at + m
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
    return this.paths
  }

  /**
   * Buckets for `paths` paths before the table grows: a load that knows its size roughly
   * places each record once. Records land all over the buckets, so each one reserved takes
   * its 128 bytes: a guess too high costs memory, one too low a growth or two.
   */
  reserve(paths: number) {
    const wanted = Math.min(Math.ceil(Math.max(0, paths) / MAX_LOAD), MAX_RESERVE_BUCKETS)
    if (wanted > this.capacity) this.rebuild(wanted)
  }

  /** Bytes of the arena in use, records left behind included (bench/slug-table-updates.ts, tests). */
  get arenaBytes(): number {
    return this.used
  }

  /**
   * Applies a state unless the table holds a newer one; says whether it applied. A slug that
   * is not visible ASCII can never match a request path byte for byte: it is not held; nor is
   * a link whose ids are not visible ASCII (the service makes none: infra/Ids.ts).
   */
  apply(state: LinkState): boolean {
    const path = `/${state.slug}`
    if (!storablePath(path) || !storableId(state.id) || !storableId(state.accountId)) return false
    const h = this.hash(path)
    let row = this.find(path, h)
    if (row >= 0 && state.updatedAt < this.versions[this.i32[(row >>> 2) + LINK]!]!) return false
    // Reserved slugs (healthz, readyz, …) are the short host's own paths: never a redirect,
    // even for a row written before its slug was reserved. Checked here, not per request.
    const location =
      state.active && !isReservedSlug(state.slug) ? prepareLocation(state.destinationUrl, state.utm) : null
    let link: number
    if (row < 0) {
      if (this.paths + 1 > this.capacity * MAX_LOAD)
        this.rebuild(Math.min(Math.ceil(this.capacity * GROWTH), MAX_BUCKETS))
      row = this.claim(h)
      this.paths++
      link = this.newLink()
    } else {
      if (this.f64[row >>> 3] !== NO_REDIRECT) this.size--
      link = this.i32[(row >>> 2) + LINK]!
      // A path names one link for good; a state that says otherwise (the service makes none)
      // takes a number of its own, so no click is counted for the other link.
      if (!this.holdsId(row, state.id)) link = this.newLink()
    }
    const i = row >>> 2
    this.versions[link] = state.updatedAt
    this.i32[i + LINK] = link
    this.i32[i + ACCOUNT] = this.account(state.accountId)
    this.write(row, path, state.id, location ?? "")
    if (location === null) {
      this.f64[row >>> 3] = NO_REDIRECT
      return true
    }
    this.f64[row >>> 3] = state.expiresAt ?? Number.POSITIVE_INFINITY
    this.size++
    return true
  }

  /** A new link number, with room for its version. */
  private newLink(): number {
    const n = this.links++
    if (n === this.versions.length) {
      const wider = new Float64Array(n * 2)
      wider.set(this.versions)
      this.versions = wider
    }
    return n
  }

  private holdsId(row: number, id: string): boolean {
    if (this.bytes[row + ID_LENGTH] !== id.length) return false
    const bytes = this.bytesOf(row)
    const from = this.linkIdAt(row)
    for (let k = 0; k < id.length; k++) if (bytes[from + k] !== id.charCodeAt(k)) return false
    return true
  }

  private account(id: string): number {
    // Rows come account by account more often than not: one comparison, no hashing.
    if (id === this.lastAccount) return this.lastAccountNumber
    let n = this.accounts.get(id)
    if (n === undefined) {
      n = this.accountIds.length
      this.accountIds.push(id)
      const entry = Buffer.alloc(4 + id.length)
      entry.writeUInt32LE(id.length, 0)
      entry.write(id, 4, "latin1")
      this.accountEntries.push(viewOf(entry))
      this.accounts.set(id, n)
    }
    this.lastAccount = id
    this.lastAccountNumber = n
    return n
  }

  /** The first empty bucket of the hash's run, tagged: its row. */
  private claim(h: number): number {
    let i = this.home(h)
    while (this.tags[i] !== 0) if (++i === this.capacity) i = 0
    this.tags[i] = tagOf(h)
    return BASE + i * BUCKET
  }

  /**
   * The bucket's path, link id and Location: in the bucket when they fit, else in the arena
   * (where they were, if they still fit there; else at its end, leaving the old bytes behind).
   */
  private write(row: number, path: string, id: string, location: string) {
    const i = row >>> 2
    const n = path.length + id.length + location.length
    const bytes = this.bytes
    const wasArena = bytes[row + KIND] === IN_ARENA
    let to: number
    let target: Uint8Array
    if (DATA + n <= BUCKET) {
      if (wasArena) this.moved += this.i32[i + ROOM]!
      bytes[row + KIND] = INLINE
      to = row + DATA
      target = bytes
    } else {
      if (!wasArena || this.i32[i + ROOM]! < n) {
        if (wasArena) this.moved += this.i32[i + ROOM]!
        const room = align8(n)
        this.i32[i + ARENA_AT] = this.allocate(room) / 8
        this.i32[i + ROOM] = room
        bytes[row + KIND] = IN_ARENA
      }
      to = this.i32[i + ARENA_AT]! * 8
      target = this.arena
    }
    bytes[row + PATH_LENGTH] = path.length
    bytes[row + ID_LENGTH] = id.length
    this.i32[i + LOCATION_LENGTH] = location.length
    to = put(target, to, path)
    to = put(target, to, id)
    put(target, to, location)
    if (this.moved >= this.compactAfterBytes && this.moved * 2 >= this.used) this.compact()
  }

  /** `room` bytes at the arena's end: their offset. */
  private allocate(room: number): number {
    if (this.used + room > this.arena.length) {
      const wider = Buffer.alloc(Math.max(this.arena.length * 2, this.used + room))
      this.arena.copy(wider, 0, 0, this.used)
      this.arena = wider
      this.arenaView = viewOf(wider)
    }
    const at = this.used
    this.used += room
    return at
  }

  /** Every record in `capacity` buckets (at most MAX_LOAD of them used), each placed again by its path's hash. */
  private rebuild(capacity: number) {
    if (this.paths + 1 > capacity * MAX_LOAD) throw new Error(`slug table full: ${this.paths} paths`)
    const oldTags = this.tags
    const old = this.i32
    const oldBytes = this.bytes
    const oldCapacity = this.capacity
    this.capacity = capacity
    this.scale = capacity / 2 ** 32
    this.buffer = tableOf(capacity)
    this.tags = new Uint8Array(this.buffer, tagsAt(capacity), capacity)
    this.bytes = Buffer.from(this.buffer)
    this.f64 = new Float64Array(this.buffer)
    this.i32 = new Int32Array(this.buffer)
    this.view = new DataView(this.buffer)
    const to = this.i32
    for (let j = 0; j < oldCapacity; j++) {
      if (oldTags[j] === 0) continue
      const from = BASE + j * BUCKET
      const inline = oldBytes[from + KIND] === INLINE
      const h = this.hashOfBytes(
        inline ? oldBytes : this.arena,
        inline ? from + DATA : old[(from >>> 2) + ARENA_AT]! * 8,
        oldBytes[from + PATH_LENGTH]!
      )
      const row = this.claim(h)
      // Copied as int32 words: no view allocated per bucket.
      for (let k = 0, a = from >>> 2, b = row >>> 2; k < BUCKET / 4; k++) to[b + k] = old[a + k]!
    }
  }

  /** The records in the arena into a new one, in bucket order; their buckets point there. */
  private compact() {
    const live = this.used - this.moved
    const arena = Buffer.alloc(align8(Math.max(INITIAL_ARENA, live + (live >> 1))))
    let used = 8
    for (let j = 0; j < this.capacity; j++) {
      const row = BASE + j * BUCKET
      if (this.tags[j] === 0 || this.bytes[row + KIND] !== IN_ARENA) continue
      const i = row >>> 2
      const from = this.i32[i + ARENA_AT]! * 8
      const room = this.i32[i + ROOM]!
      this.arena.copy(arena, used, from, from + room)
      this.i32[i + ARENA_AT] = used / 8
      used += room
    }
    this.arena = arena
    this.arenaView = viewOf(arena)
    this.used = used
    this.moved = 0
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

/** Rows per batch the load applies between two turns of the event loop. */
const LOAD_BATCH = 10_000

/**
 * Every stored link, streamed from the database in batches, so memory stays flat while
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
    // The buckets are in huge pages when glibc asks for them (scripts/redirector.sh).
    const huge = hugePagesOf()
    // The CPU time too: on a shared machine the wall time says more about the neighbours.
    yield* Effect.logInfo(
      `slug table loaded: ${loaded} links (${table.size} active) in ${Date.now() - started} ms ` +
        `(cpu ${Math.round((used.user + used.system) / 1000)} ms), rss ${rssMb} MB` +
        (huge === null ? "" : `, ${Math.round(huge / 1048576)} MB of it in huge pages`)
    )
    yield* log.follow({ topic: Topics.links, startAt: { _tag: "Offsets", offsets } }, LinkEvent, (batch) =>
      Effect.sync(() => {
        for (const { event } of batch.events) table.apply(stateOfEvent(event))
      })
    )
  })
