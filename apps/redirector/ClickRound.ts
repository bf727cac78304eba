import { randomBytes } from "node:crypto"
import { ipText, ipv4Offset, ipv4Text, type RawPeer } from "../../infra/http/HttpServer.js"
import { MAX_RUN_ENTRY } from "./SlugTable.js"

/** What recording a click asks of the slug table (SlugTable implements it), by the row its lookup gave. */
export interface ClickLinks {
  /** The row's link: a number no other link of the table ever has. */
  linkNumber(row: number): number
  /** The row's account id (one string per account). */
  accountId(row: number): string
  /** The row's run entry (ids as the spool keeps them, at most MAX_RUN_ENTRY bytes) at `at` in `out`; its end. */
  writeRun(row: number, out: Buffer, at: number): number
}

/** A round's event id prefix: unique without a CSPRNG call per event. */
const newRoundId = () => `evt_${randomBytes(10).toString("hex")}`

/** What the click buffer asks of a crash spool (ClickSpool.ts). */
export interface RoundSpool {
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
 * `runBytes`: the link's and the account's id as the crash spool writes them, copied from the
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
  /** Per run: its link's number (the slug table's, or the reader's for a round read back), its account (index into `accountValues`), where its entry starts in `runBytes`. */
  runLink: Int32Array
  runAccount: Int32Array
  runAt: Int32Array
  /** The runs' entries: per run the u32 length and bytes of its link id, then of its account id. */
  runBytes: Buffer
  /** Bytes of `runBytes` in use. */
  runEnd = 0
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
    this.runBytes = Buffer.allocUnsafe(capacity * 64)
    this.times = new Float64Array(capacity)
    this.peers = new Int32Array(capacity)
    this.agents = new Int32Array(capacity)
    this.referers = new Int32Array(capacity)
    this.countries = new Int32Array(capacity)
  }

  /** Where the bytes of run `r`'s link id start in `runBytes` (after their u32 length). */
  linkIdAt(r: number): number {
    return this.runAt[r]! + 4
  }

  /** The length of run `r`'s link id, in bytes (one a character: visible ASCII). */
  linkIdLength(r: number): number {
    return this.runBytes.readUInt32LE(this.runAt[r]!)
  }

  /** The link id of run `r` (a new string: for tests and tools; the flusher copies the run's bytes, ClickGroup.ts). */
  linkIdOf(r: number): string {
    const from = this.linkIdAt(r)
    return this.runBytes.toString("latin1", from, from + this.linkIdLength(r))
  }

  /** The account id of run `r`. */
  accountIdOf(r: number): string {
    return this.accountValues.values[this.runAccount[r]!]!
  }

  /** A run read back from a spool: `link` numbers the reader's distinct link ids; ids the slug table could hold (`storableId`). */
  pushRun(link: number, linkId: string, accountId: string) {
    const r = this.startRun(link, accountId) // may widen runBytes
    const out = this.runBytes
    let at = this.runAt[r]!
    for (const id of [linkId, accountId]) {
      out.writeUInt32LE(id.length, at)
      at += 4 + out.write(id, at + 4, "latin1")
    }
    this.runEnd = at
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

  /** A new run of `link`'s clicks (its entry is the caller's to write from `runAt`, with room for MAX_RUN_ENTRY bytes). */
  private startRun(link: number, accountId: string): number {
    const r = this.runs
    if (r === this.runLink.length) {
      const size = r * 2
      this.runLink = widen(this.runLink, size)
      this.runAccount = widen(this.runAccount, size)
      this.runAt = widen(this.runAt, size)
    }
    if (this.runEnd + MAX_RUN_ENTRY > this.runBytes.length) {
      const wider = Buffer.allocUnsafe(Math.max(this.runBytes.length * 2, this.runEnd + MAX_RUN_ENTRY))
      this.runBytes.copy(wider, 0, 0, this.runEnd)
      this.runBytes = wider
    }
    this.runLink[r] = link
    this.runAccount[r] = this.accountValues.of(accountId)
    this.runAt[r] = this.runEnd
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

  /** A click on the link at `row` of `links` (the slug table). */
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
      this.runEnd = links.writeRun(row, this.runBytes, this.runAt[r]!)
    }
    this.run[i] = this.runs - 1
    this.times[i] = time
    this.peers[i] = this.peerOf(peer)
    this.agents[i] = this.agentValues.of(userAgent)
    this.referers[i] = referer === "" ? -1 : this.refererValues.of(referer)
    this.countries[i] = country === "" ? -1 : this.countryValues.of(country)
    this.count = i + 1
  }

  /** Empty again, for reuse; forgets the links it pointed to. */
  reset() {
    this.count = 0
    this.runs = 0
    this.runEnd = 0
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
  /** Rounds taken whose conversion has to be tried again (the day's secret was unreadable). */
  readonly retry: Array<ClickRound> = []
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
    this.current = this.spare.pop() ?? new ClickRound(Math.min(this.batchSize, 16_384))
    return taken
  }

  /** A converted round, back for reuse (two are kept). */
  release(round: ClickRound) {
    round.reset()
    if (this.spare.length < 2) this.spare.push(round)
  }
}
