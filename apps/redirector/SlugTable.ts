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
 * A record's fixed part, in bytes: two times (float64 at 0 and 8), then six int32 fields;
 * the path's bytes follow it, then the link id's, then the Location's. Records start at
 * multiples of 8.
 */
const HEAD = 40
/** Float64 fields (from the record's offset / 8). */
const EXPIRES_AT = 0
const UPDATED_AT = 1
/** Int32 fields (from the record's offset / 4). */
const LINK = 4
const PATH_LENGTH = 5
const LOCATION_LENGTH = 6
/** Bytes the record has for a Location: an update that fits is written in place. */
const LOCATION_ROOM = 7
/** The number of the link's account (`SlugTable.accountIds`). */
const ACCOUNT = 8
const ID_LENGTH = 9
/** A record that does not redirect keeps its version with this expiry: every time is after it. */
const NO_REDIRECT = Number.NEGATIVE_INFINITY
/** The longest path a record holds: "/" and a slug of at most 32 characters, with room to spare. */
const MAX_PATH = 255
/** The arena's first size; it doubles when full, and is compacted when half of it is moved records. */
const INITIAL_BYTES = 1 << 16
const INITIAL_SLOTS = 1 << 10
/** Bytes of moved records (older versions of a grown Location) worth a compaction. */
const COMPACT_AFTER = 16 << 20

/** Arena bytes a reservation gives each path: a record with a link id of ~30 and a Location of ~80 characters. */
const RESERVE_BYTES_PER_PATH = 160
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
 * redirect needs, for a million links and more, laid out so that a random lookup touches as
 * few cache lines as it can (a million links do not fit in any cache, so every line is a
 * miss: bench/slug-table-lookup.ts).
 *
 * - Each path has one **record** in one arena of bytes: its expiry and version, its link's
 *   number and its account's, the path's bytes, the link id's and the Location's, side by side.
 *   A lookup reads one slot of the hash index and then the record, usually one or two cache
 *   lines; the redirect's Location is a view of the record's bytes (uWebSockets.js copies it
 *   from there), and click capture copies the link id from the same lines (`writeRun`): a
 *   click on a link that is in no cache touches nothing else of it.
 * - The **index** is open addressing with linear probing over an Int32Array of slots, each a
 *   path's hash and its record's offset: a probe compares the hash before it reads a record.
 *   The hash is seeded per process: which slots slugs land in is not known outside it, so
 *   nobody can pick custom slugs that pile up in one run of slots.
 * - Account ids, few, are strings (and bytes) by account number.
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
  /** Link numbers given so far (a record's link number is never another link's). */
  private links = 0
  /** Paths with a record. */
  private paths = 0
  /** By account number: the account's id, as a string and as bytes (one copy each, whatever the rows bring). */
  private readonly accountIds: Array<string> = []
  private readonly accountBytes: Array<Buffer> = []
  private readonly accounts = new Map<string, number>()
  private lastAccount = ""
  private lastAccountNumber = -1
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
    return new Uint8Array(this.buffer, this.locationAt(row), this.i32[i + LOCATION_LENGTH]!)
  }

  /** The record's link number: no other link of this table ever has it. */
  linkNumber(row: number): number {
    return this.i32[(row >>> 2) + LINK]!
  }

  /** The record's link id (a new string: not for the request path, which copies bytes with `writeRun`). */
  linkId(row: number): string {
    const from = this.idAt(row)
    return this.bytes.toString("latin1", from, from + this.i32[(row >>> 2) + ID_LENGTH]!)
  }

  /** The record's account id (the table's one string for that account). */
  accountId(row: number): string {
    return this.accountIds[this.i32[(row >>> 2) + ACCOUNT]!]!
  }

  /**
   * The record's run entry at `at` in `out` (room for MAX_RUN_ENTRY bytes): the u32 length and
   * bytes of the link id, then of the account id, as the crash spool keeps them
   * (ClickSpool.ts); says where it ends. Copied from the record, whose lines the lookup has
   * just read, byte by byte (ids are short: less than a call), allocating nothing.
   */
  writeRun(row: number, out: Buffer, at: number): number {
    const i = row >>> 2
    const bytes = this.bytes
    const from = this.idAt(row)
    const n = this.i32[i + ID_LENGTH]!
    out.writeUInt32LE(n, at)
    for (let k = 0; k < n; k++) out[at + 4 + k] = bytes[from + k]!
    at += 4 + n
    const account = this.accountBytes[this.i32[i + ACCOUNT]!]!
    const m = account.length
    out.writeUInt32LE(m, at)
    for (let k = 0; k < m; k++) out[at + 4 + k] = account[k]!
    return at + 4 + m
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
   * is not visible ASCII can never match a request path byte for byte: it is not held; nor is
   * a link whose ids are not visible ASCII (the service makes none: infra/Ids.ts).
   */
  apply(state: LinkState): boolean {
    const path = `/${state.slug}`
    if (!storablePath(path) || !storableId(state.id) || !storableId(state.accountId)) return false
    const h = this.hash(path)
    let at = this.find(path, h)
    if (at >= 0 && state.updatedAt < this.f64[(at >>> 3) + UPDATED_AT]!) return false
    // Reserved slugs (healthz, readyz, …) are the short host's own paths: never a redirect,
    // even for a row written before its slug was reserved. Checked here, not per request.
    const location =
      state.active && !isReservedSlug(state.slug) ? prepareLocation(state.destinationUrl, state.utm) : null
    const room = location?.length ?? 0
    if (at < 0) {
      this.paths++
      at = this.insert(path, h, this.links++, state.id, room)
    } else {
      if (this.f64[at >>> 3] !== NO_REDIRECT) this.size--
      // A path names one link for good; a state that says otherwise (the service makes none)
      // takes a record and a number of its own, so no click is counted for the other link.
      if (!this.holdsId(at, state.id)) at = this.move(path, h, at, state.id, room, this.links++)
      else if (room > this.i32[(at >>> 2) + LOCATION_ROOM]!) at = this.move(path, h, at, state.id, room)
    }
    const i = at >>> 2
    this.f64[(at >>> 3) + UPDATED_AT] = state.updatedAt
    this.i32[i + ACCOUNT] = this.account(state.accountId)
    if (location === null) {
      this.f64[(at >>> 3) + EXPIRES_AT] = NO_REDIRECT
      this.i32[i + LOCATION_LENGTH] = 0
      return true
    }
    this.bytes.write(location, this.locationAt(at), "latin1")
    this.i32[i + LOCATION_LENGTH] = location.length
    this.f64[(at >>> 3) + EXPIRES_AT] = state.expiresAt ?? Number.POSITIVE_INFINITY
    this.size++
    return true
  }

  /** Where the record's link id starts: after its path. */
  private idAt(at: number): number {
    return at + HEAD + this.i32[(at >>> 2) + PATH_LENGTH]!
  }

  /** Where the record's Location starts: after its link id. */
  private locationAt(at: number): number {
    return this.idAt(at) + this.i32[(at >>> 2) + ID_LENGTH]!
  }

  private holdsId(at: number, id: string): boolean {
    if (this.i32[(at >>> 2) + ID_LENGTH] !== id.length) return false
    const from = this.idAt(at)
    for (let k = 0; k < id.length; k++) if (this.bytes[from + k] !== id.charCodeAt(k)) return false
    return true
  }

  private account(id: string): number {
    // Rows come account by account more often than not: one comparison, no hashing.
    if (id === this.lastAccount) return this.lastAccountNumber
    let n = this.accounts.get(id)
    if (n === undefined) {
      n = this.accountIds.length
      this.accountIds.push(id)
      this.accountBytes.push(Buffer.from(id, "latin1"))
      this.accounts.set(id, n)
    }
    this.lastAccount = id
    this.lastAccountNumber = n
    return n
  }

  /** A new record for `path` at the arena's end, in the index. */
  private insert(path: string, h: number, link: number, id: string, room: number): number {
    // Called after the path was counted. At most half the slots in use: short probe runs.
    if (2 * this.paths > this.mask + 1) this.growIndex()
    const at = this.allocate(path, link, id, room)
    place(this.slots, this.mask, h, at / 8)
    return at
  }

  /** The record at `from` again at the arena's end with more room; the index points there. */
  private move(
    path: string,
    h: number,
    from: number,
    id: string,
    room: number,
    link = this.i32[(from >>> 2) + LINK]!
  ): number {
    // A resize keeps every offset, so `from` still holds the record after `allocate`.
    const to = this.allocate(path, link, id, room)
    this.moved += this.recordBytes(from)
    this.i32[(from >>> 2) + LINK] = MOVED
    this.pointTo(h, from, to)
    if (this.moved >= this.compactAfterBytes && this.moved * 2 >= this.used) return this.compact(to)
    return to
  }

  private recordBytes(at: number): number {
    const i = at >>> 2
    return align8(HEAD + this.i32[i + PATH_LENGTH]! + this.i32[i + ID_LENGTH]! + this.i32[i + LOCATION_ROOM]!)
  }

  /** The slot that points at the record at `from` points at `to`. */
  private pointTo(h: number, from: number, to: number) {
    let i = h & this.mask
    while (this.slots[i * 2 + 1] !== from / 8) i = (i + 1) & this.mask
    this.slots[i * 2 + 1] = to / 8
  }

  /** Space for a record at the arena's end, its fixed part, path and link id written. */
  private allocate(path: string, link: number, id: string, room: number): number {
    const size = align8(HEAD + path.length + id.length + room)
    if (this.used + size > this.buffer.byteLength) this.resize(Math.max(this.buffer.byteLength * 2, this.used + size))
    const at = this.used
    this.used += size
    const i = at >>> 2
    this.f64[(at >>> 3) + EXPIRES_AT] = NO_REDIRECT
    this.i32[i + LINK] = link
    this.i32[i + PATH_LENGTH] = path.length
    this.i32[i + LOCATION_LENGTH] = 0
    this.i32[i + LOCATION_ROOM] = room
    this.i32[i + ID_LENGTH] = id.length
    this.bytes.write(path, at + HEAD, "latin1")
    this.bytes.write(id, at + HEAD + path.length, "latin1")
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
