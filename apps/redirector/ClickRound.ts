import { randomBytes } from "node:crypto"
import { ipText, ipv4Offset, ipv4Text, type RawPeer } from "../../infra/http/HttpServer.js"
import { viewOf } from "./Bytes.js"
import { MAX_RUN_ENTRY } from "./SlugTable.js"

/** What recording a click asks of the slug table (SlugTable implements it), by the row its lookup gave. */
export interface ClickLinks {
  /** The row's link: a number no other link of the table ever has. */
  linkNumber(row: number): number
  /** The row's account id (one string per account). */
  accountId(row: number): string
  /** The row's run entry (ids as the spool keeps them, at most MAX_RUN_ENTRY bytes) at `at` in `out`; its end. */
  writeRun(row: number, out: DataView, at: number): number
}

/** A round's event id prefix: unique without a CSPRNG call per event. */
const newRoundId = () => `evt_${randomBytes(10).toString("hex")}`

/**
 * A round's journal: a header, then its records, each 8-aligned: word 0 the round's tag
 * (written last: a record whose tag is not the round's is the end), word 1 the kind (low byte)
 * and the body's length (the upper 24 bits), then the body. The crash spool maps its files
 * over journals (ClickSpool.ts), so a click is in the page cache before its 302 leaves.
 *
 * The header: magic (u32), the round's tag (u32; 0: no round), the round's start (f64, ms)
 * and sequence number (u32) for the order rounds are published in after a crash, the round id
 * (24 ASCII bytes at 24).
 */
export const JOURNAL_MAGIC = 0x314a4b43 // "CKJ1"
export const JOURNAL_HEADER = 64
/** A journal's size: 2 MiB hold ~24,000 clicks on links each other than the last, ~65,000 on one link. */
export const JOURNAL_BYTES = 2 << 20
/** Records: a click (body: time f64, then peer, agent, referer, country as i32 indexes; its run the last RUN's). */
export const CLICK = 1
/** A run: its entry as `ClickLinks.writeRun` writes it. */
export const RUN = 2
/** A new value of list c (peers 0, agents 1, referers 2, countries 3), UTF-8: kind VALUES + c. */
export const VALUES = 3
const CLICK_WORD = CLICK | (24 << 8)
/**
 * What one click may add to a journal besides its three header strings (3 bytes a UTF-16 unit
 * at most): its record, a run's, four values' heads and padding, and an address's text (at
 * most 45 characters: an IPv6 address, `TrustedProxies.ts` checks a forwarded one).
 */
const CLICK_ROOM = 32 + (8 + MAX_RUN_ENTRY + 7) + 4 * 15 + 3 * 64
/** A round's journal before its `begin` (and after its `reset`): none. */
const NO_JOURNAL = Buffer.alloc(0)
const NO_WORDS = new Int32Array(0)
const NO_DOUBLES = new Float64Array(0)
const NO_VIEW = new DataView(new ArrayBuffer(0))
/** The tag of a round's records: 32 bits of its id, never 0. */
export const tagOf = (id: string): number => Number.parseInt(id.slice(4, 12), 16) | 0 || 1

/** What the click buffer asks of a crash spool (ClickSpool.ts). */
export interface RoundSpool {
  /** Gives a round that starts its journal (a mapped file's, or one in memory that the spool writes). */
  assign(round: ClickRound): void
  /** A click arrived while the writer slept: write within the spool's interval. */
  wake(): void
  /** SPOOL_BATCH clicks wait for a write: write at the end of this event loop turn. */
  hurry(): void
  /** Writes what of the round is not written yet and closes its segment: the round is complete. */
  seal(round: ClickRound): void
  /** Takes the sealed segment off a converted round (which is then reused): a token for `remove`. */
  detach(round: ClickRound): unknown
  /** The events of a detached segment are all acknowledged by the event log: deletes it. */
  remove(segment: unknown): void
}

/** Distinct strings of one generation, each once, by index. */
export class Interned {
  readonly values: Array<string> = []
  private readonly index = new Map<string, number>()
  /** The last string asked for: a header read per request is a new string, and comparing it costs less than hashing it. */
  private last: string | undefined = undefined
  private lastIndex = -1
  of(s: string): number {
    if (s === this.last) return this.lastIndex
    let i = this.index.get(s)
    if (i === undefined) {
      i = this.values.length
      this.values.push(s)
      this.index.set(s, i)
    }
    this.last = s
    this.lastIndex = i
    return i
  }
  clear() {
    this.values.length = 0
    this.index.clear()
    this.last = undefined
    this.lastIndex = -1
  }
}

/** `a` in a new array of `size` (larger). */
const widen = <T extends Float64Array | Int32Array>(a: T, size: number): T => {
  const b = new (a.constructor as new (n: number) => T)(size)
  b.set(a)
  return b
}

/** An IPv4 address (also IPv4-mapped IPv6) as one int32; undefined for other addresses. */
const ipv4Key = (b: Uint8Array): number | undefined => {
  const o = ipv4Offset(b)
  return o < 0 ? undefined : (b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!
}

/**
 * The raw clicks of one round, column by column: typed arrays of times and of indexes into
 * the round's distinct addresses, user agents, referers and country headers. Recording a
 * click allocates nothing that outlives the request (the header strings a request reads die
 * young unless they are new this round), so a busy redirector does not promote every click's
 * strings into the old generation and pay for them in long collections.
 *
 * A click's link is its **run**'s: each run of clicks on one link (a new one whenever the link
 * differs from the last click's) has the link's number and its account, and its entry in
 * the journal: the link's and the account's id as the crash spool keeps them, copied from the
 * slug table's record while the lookup has it in the cache. So a click on a link that is in no
 * cache touches no string of it, and the spool writes the entries as they are.
 */
export class ClickRound {
  count = 0
  /**
   * The prefix of the ids of the events made from this round (a counter follows it): fixed
   * when the round starts, kept in its spool segment, so a round published again after a
   * crash carries the same event ids and is counted once downstream.
   */
  id = newRoundId()
  /** What the spool knows of this round (its segment and how much of the round is in it). */
  spool: unknown = undefined
  /** Per click: the index of its run. */
  run: Int32Array
  /** Runs so far. */
  runs = 0
  /** Per run: its link's number (the slug table's, or the reader's for a round read back), its account (index into `accountValues`), where its entry starts in `journal`. */
  runLink: Int32Array
  runAccount: Int32Array
  runAt: Int32Array
  /**
   * The round's journal (JOURNAL_HEADER): a spool's mapped file, or memory of the round's own.
   * The runs' entries are in it (per run the u32 length and bytes of its link id, then of its
   * account id), where the flusher copies them from.
   */
  journal: Buffer = NO_JOURNAL
  /** Bytes of `journal` in use, and its size. */
  journalEnd = 0
  journalSize = 0
  /** The journal's words, to store a click's record with. */
  private words = NO_WORDS
  private doubles = NO_DOUBLES
  /** `journal` as a DataView (`journalView`), and the buffer it was made for. */
  private view: DataView = NO_VIEW
  private viewed: Buffer = NO_JOURNAL
  /** The tag of this round's records (tagOf its id). */
  private tag = 0
  /** Values of each list in the journal. */
  private readonly logged = [0, 0, 0, 0]
  /** The journal of the round's own (in memory), kept for its next rounds. */
  private own: ArrayBuffer | undefined = undefined
  /** The link number of the last click (-1: none yet). */
  private lastLink = -1
  readonly accountValues = new Interned()
  times: Float64Array
  peers: Int32Array
  agents: Int32Array
  referers: Int32Array
  countries: Int32Array
  readonly peerValues = new Interned()
  private readonly peerByV4 = new Map<number, number>()
  readonly agentValues = new Interned()
  readonly refererValues = new Interned()
  readonly countryValues = new Interned()

  constructor(capacity: number) {
    this.run = new Int32Array(capacity)
    this.runLink = new Int32Array(capacity)
    this.runAccount = new Int32Array(capacity)
    this.runAt = new Int32Array(capacity)
    this.times = new Float64Array(capacity)
    this.peers = new Int32Array(capacity)
    this.agents = new Int32Array(capacity)
    this.referers = new Int32Array(capacity)
    this.countries = new Int32Array(capacity)
  }

  /** Where the bytes of run `r`'s link id start in `journal` (after their u32 length). */
  linkIdAt(r: number): number {
    return this.runAt[r]! + 4
  }

  /** The length of run `r`'s link id, in bytes (one a character: visible ASCII). */
  linkIdLength(r: number): number {
    return this.journal.readUInt32LE(this.runAt[r]!)
  }

  /**
   * `journal` as a DataView, to copy ids with (Bytes.ts): made again when the journal is
   * another buffer (a new round's, a spool file read back, a wider one).
   */
  journalView(): DataView {
    const journal = this.journal
    if (this.viewed !== journal) {
      this.viewed = journal
      this.view = viewOf(journal)
    }
    return this.view
  }

  /** The link id of run `r` (a new string: for tests and tools; the flusher copies the run's bytes, ClickGroup.ts). */
  linkIdOf(r: number): string {
    const from = this.linkIdAt(r)
    return this.journal.toString("latin1", from, from + this.linkIdLength(r))
  }

  /**
   * Starts the round's journal in `memory` (all of it): its header, this round's tag written
   * last. `order` and `sequence` say when the round started (the spool's order of rounds).
   */
  begin(memory: ArrayBuffer, order = Date.now(), sequence = 0) {
    const journal = Buffer.from(memory)
    this.journal = journal
    this.journalSize = journal.length
    this.words = new Int32Array(memory)
    this.doubles = new Float64Array(memory)
    this.tag = tagOf(this.id)
    this.words[0] = JOURNAL_MAGIC
    this.doubles[1] = order
    this.words[4] = sequence
    this.words[5] = 0
    journal.write(this.id, 24, 24, "latin1")
    this.words[1] = this.tag
    this.journalEnd = JOURNAL_HEADER
  }

  /** Starts the journal in memory of the round's own (kept for its next rounds). */
  beginInMemory(order = Date.now(), sequence = 0) {
    this.own ??= new ArrayBuffer(JOURNAL_BYTES)
    this.begin(this.own, order, sequence)
  }

  /** Whether a click with these header strings fits in the journal (a full round is taken: ClickBuffer.record). */
  fits(userAgent: string, referer: string, country: string): boolean {
    return this.journalEnd + CLICK_ROOM + 3 * (userAgent.length + referer.length + country.length) <= this.journalSize
  }

  /** Closes the record from `start` to `end`: its kind and length, then the round's tag; the journal's end after it. */
  private close(kind: number, start: number, end: number) {
    const w = start >> 2
    this.words[w + 1] = kind | ((end - start - 8) << 8)
    this.words[w] = this.tag
    this.journalEnd = (end + 7) & ~7
  }

  /** The lists' values not yet in the journal, a record each. */
  private logValues() {
    const columns = this.lists()
    for (let c = 0; c < 4; c++) {
      const values = columns[c]!.values
      for (let v = this.logged[c]!; v < values.length; v++) {
        const start = this.journalEnd
        this.close(VALUES + c, start, start + 8 + this.journal.write(values[v]!, start + 8, "utf8"))
      }
      this.logged[c] = values.length
    }
  }

  /** The round's lists of values, by their column in a journal: peers, agents, referers, countries. */
  lists(): ReadonlyArray<Interned> {
    return [this.peerValues, this.agentValues, this.refererValues, this.countryValues]
  }

  /** The account id of run `r`. */
  accountIdOf(r: number): string {
    return this.accountValues.values[this.runAccount[r]!]!
  }

  /** A run of a journal read back (the round's `journal`), its entry at `at`: `link` numbers the reader's distinct link ids. */
  pushRunAt(link: number, accountId: string, at: number) {
    this.startRun(link, accountId)
    this.runAt[this.runs - 1] = at
  }

  /** A run read back from a spool file of an earlier version: its entry is written into a journal in memory. */
  pushRun(link: number, linkId: string, accountId: string) {
    if (this.journalEnd + MAX_RUN_ENTRY > this.journalSize) {
      const wider = new ArrayBuffer(Math.max(2 * this.journalSize, JOURNAL_BYTES))
      const journal = Buffer.from(wider)
      this.journal.copy(journal, 0, 0, this.journalEnd)
      this.journal = journal
      this.journalSize = journal.length
    }
    const r = this.startRun(link, accountId)
    let at = this.runAt[r]!
    for (const id of [linkId, accountId]) {
      this.journal.writeUInt32LE(id.length, at)
      at += 4 + this.journal.write(id, at + 4, "latin1")
    }
    this.journalEnd = at
  }

  /** A click read back from a spool: its run and values by index into the round's lists, which the reader filled. */
  pushIndexes(run: number, time: number, peer: number, agent: number, referer: number, country: number) {
    const i = this.count
    if (i === this.times.length) this.grow()
    this.run[i] = run
    this.times[i] = time
    this.peers[i] = peer
    this.agents[i] = agent
    this.referers[i] = referer
    this.countries[i] = country
    this.count = i + 1
  }

  private peerOf(peer: RawPeer): number {
    if (typeof peer === "string") return this.peerValues.of(peer)
    // An IPv4 address as a number: the same int32 key as its bytes give (ipv4Key).
    if (typeof peer === "number") return this.peerOfV4(peer | 0)
    const bytes = new Uint8Array(peer)
    const v4 = ipv4Key(bytes)
    return v4 === undefined ? this.peerValues.of(ipText(bytes)) : this.peerOfV4(v4)
  }

  /** The index of the IPv4 address `key` (ipv4Key's int32): formatted once a round. */
  private peerOfV4(key: number): number {
    let i = this.peerByV4.get(key)
    if (i === undefined) {
      i = this.peerValues.of(ipv4Text(key))
      this.peerByV4.set(key, i)
    }
    return i
  }

  /** A new run of `link`'s clicks (its entry is the caller's to write from `runAt`: a record's body in the journal). */
  private startRun(link: number, accountId: string): number {
    const r = this.runs
    if (r === this.runLink.length) {
      const size = r * 2
      this.runLink = widen(this.runLink, size)
      this.runAccount = widen(this.runAccount, size)
      this.runAt = widen(this.runAt, size)
    }
    this.runLink[r] = link
    this.runAccount[r] = this.accountValues.of(accountId)
    this.runAt[r] = this.journalEnd + 8
    this.runs = r + 1
    this.lastLink = link
    return r
  }

  private grow() {
    const size = this.times.length * 2
    this.run = widen(this.run, size)
    this.times = widen(this.times, size)
    this.peers = widen(this.peers, size)
    this.agents = widen(this.agents, size)
    this.referers = widen(this.referers, size)
    this.countries = widen(this.countries, size)
  }

  /**
   * A click on the link at `row` of `links` (the slug table), into the columns and the
   * journal (which has room for it: `fits`): a new run's entry and new values first, the
   * click's record last, each record's tag after the rest of it.
   */
  push(
    links: ClickLinks,
    row: number,
    time: number,
    peer: RawPeer,
    userAgent: string,
    referer: string,
    country: string
  ) {
    const i = this.count
    if (i === this.times.length) this.grow()
    const link = links.linkNumber(row)
    if (link !== this.lastLink) {
      const r = this.startRun(link, links.accountId(row))
      const at = this.runAt[r]!
      this.close(RUN, at - 8, links.writeRun(row, this.journalView(), at))
    }
    this.run[i] = this.runs - 1
    this.times[i] = time
    const p = this.peerOf(peer)
    const a = this.agentValues.of(userAgent)
    const r = referer === "" ? -1 : this.refererValues.of(referer)
    const c = country === "" ? -1 : this.countryValues.of(country)
    this.peers[i] = p
    this.agents[i] = a
    this.referers[i] = r
    this.countries[i] = c
    const logged = this.logged
    if (
      this.peerValues.values.length !== logged[0] ||
      this.agentValues.values.length !== logged[1] ||
      this.refererValues.values.length !== logged[2] ||
      this.countryValues.values.length !== logged[3]
    ) {
      this.logValues()
    }
    const at = this.journalEnd
    const w = at >> 2
    const words = this.words
    words[w + 1] = CLICK_WORD
    this.doubles[(at >> 3) + 1] = time
    words[w + 4] = p
    words[w + 5] = a
    words[w + 6] = r
    words[w + 7] = c
    words[w] = this.tag
    this.journalEnd = at + 32
    this.count = i + 1
  }

  /** Empty again, for reuse (its next `begin` gives it a journal); forgets the links it pointed to. */
  reset() {
    this.count = 0
    this.runs = 0
    this.journal = NO_JOURNAL
    this.journalEnd = 0
    this.journalSize = 0
    this.words = NO_WORDS
    this.doubles = NO_DOUBLES
    this.view = NO_VIEW
    this.viewed = NO_JOURNAL
    this.logged.fill(0)
    this.lastLink = -1
    this.accountValues.clear()
    this.id = newRoundId()
    this.spool = undefined
    this.peerValues.clear()
    this.peerByV4.clear()
    this.agentValues.clear()
    this.refererValues.clear()
    this.countryValues.clear()
  }
}

/**
 * The request path's side of click capture: the current round's clicks. Address and user
 * agent stay in this process; the flusher turns them into the event's privacy fields before
 * anything is published.
 */
export class ClickBuffer {
  /** Clicks of the current round. */
  count = 0
  /** Clicks taken from the request path (being converted, or converted and waiting to be published). */
  waiting = 0
  /** Clicks recorded, ever (for /metrics: plain numbers, read when it is rendered). */
  captured = 0
  /** Clicks not recorded because the buffer was full, ever. */
  dropped = 0
  /** Clicks the event log acknowledged, ever (a crashed process's, published here, included). */
  published = 0
  /** Set while the flusher sleeps: cuts the sleep short when a batch is full. */
  wake: (() => void) | undefined = undefined
  current: ClickRound
  /** Rounds taken and not converted yet, in order: full ones, and ones whose conversion has to be tried again (the day's secret was unreadable). */
  readonly taken: Array<ClickRound> = []
  private readonly spare: Array<ClickRound> = []
  /**
   * The crash spool, if any: `spoolIdle` is set while its writer sleeps, and the next click
   * wakes it (one field read per click); when `count` reaches `spoolDue` while the writer
   * waits out its interval, it writes at the end of the turn instead. A round is sealed in it
   * before the flusher takes it.
   */
  spool: RoundSpool | undefined = undefined
  spoolIdle = false
  spoolDue = -1

  constructor(
    readonly maxBuffered: number,
    readonly batchSize: number
  ) {
    this.current = new ClickRound(Math.min(batchSize, 16_384))
    this.current.beginInMemory()
  }

  /** A click on the link at `row` of `links`; `peer` as HttpExchange.remoteAddressRaw gives it (RawPeer). */
  record(
    links: ClickLinks,
    row: number,
    time: number,
    peer: RawPeer,
    userAgent: string,
    referer: string,
    country: string
  ): void {
    if (this.count + this.waiting >= this.maxBuffered) {
      this.dropped++
      return
    }
    if (!this.current.fits(userAgent, referer, country)) {
      // A full journal: the round goes to the flusher as it is, the click starts the next one.
      this.taken.push(this.take())
      this.wake?.()
    }
    this.current.push(links, row, time, peer, userAgent, referer, country)
    this.captured++
    const count = ++this.count
    if (this.spoolIdle) this.spool!.wake()
    else if (count === this.spoolDue) this.spool!.hurry()
    if (count >= this.batchSize && this.wake !== undefined) this.wake()
  }

  /** The current round, for the flusher; recording goes on into a fresh (or reused) one. */
  take(): ClickRound {
    const taken = this.current
    this.spool?.seal(taken)
    this.waiting += taken.count
    this.count = 0
    const next = this.spare.pop() ?? new ClickRound(Math.min(this.batchSize, 16_384))
    if (this.spool === undefined) next.beginInMemory()
    else this.spool.assign(next)
    this.current = next
    return taken
  }

  /** A converted round, back for reuse (two are kept). */
  release(round: ClickRound) {
    round.reset()
    if (this.spare.length < 2) this.spare.push(round)
  }
}
