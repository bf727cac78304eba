import { randomBytes } from "node:crypto"
import { ipText, ipv4Offset } from "../../infra/http/HttpServer.js"

/** A round's event id prefix: unique without a CSPRNG call per event. */
const newRoundId = () => `evt_${randomBytes(10).toString("hex")}`

/** What the click buffer asks of a crash spool (ClickSpool.ts). */
export interface RoundSpool {
  /** A click arrived while the writer slept: write within the spool's interval. */
  wake(): void
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
  /** Per click: the link and its account, the slug table's own strings (nothing copied per click). */
  linkIds: Array<string | undefined>
  accountIds: Array<string | undefined>
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
    this.linkIds = new Array(capacity)
    this.accountIds = new Array(capacity)
    this.times = new Float64Array(capacity)
    this.peers = new Int32Array(capacity)
    this.agents = new Int32Array(capacity)
    this.referers = new Int32Array(capacity)
    this.countries = new Int32Array(capacity)
  }

  /** A click read back from a spool: values by index into the round's lists, which the reader filled. */
  pushIndexes(
    linkId: string,
    accountId: string,
    time: number,
    peer: number,
    agent: number,
    referer: number,
    country: number
  ) {
    const i = this.count
    if (i === this.times.length) this.grow()
    this.linkIds[i] = linkId
    this.accountIds[i] = accountId
    this.times[i] = time
    this.peers[i] = peer
    this.agents[i] = agent
    this.referers[i] = referer
    this.countries[i] = country
    this.count = i + 1
  }

  private peerOf(peer: ArrayBuffer | string): number {
    if (typeof peer === "string") return this.peerValues.of(peer)
    const bytes = new Uint8Array(peer)
    const v4 = ipv4Key(bytes)
    if (v4 === undefined) return this.peerValues.of(ipText(bytes))
    let i = this.peerByV4.get(v4)
    if (i === undefined) {
      i = this.peerValues.of(ipText(bytes))
      this.peerByV4.set(v4, i)
    }
    return i
  }

  private grow() {
    const size = this.times.length * 2
    const widen = <T extends Float64Array | Int32Array>(a: T, make: (n: number) => T): T => {
      const b = make(size)
      b.set(a)
      return b
    }
    this.linkIds.length = size
    this.accountIds.length = size
    this.times = widen(this.times, (n) => new Float64Array(n))
    this.peers = widen(this.peers, (n) => new Int32Array(n))
    this.agents = widen(this.agents, (n) => new Int32Array(n))
    this.referers = widen(this.referers, (n) => new Int32Array(n))
    this.countries = widen(this.countries, (n) => new Int32Array(n))
  }

  push(
    linkId: string,
    accountId: string,
    time: number,
    peer: ArrayBuffer | string,
    userAgent: string,
    referer: string,
    country: string
  ) {
    const i = this.count
    if (i === this.times.length) this.grow()
    this.linkIds[i] = linkId
    this.accountIds[i] = accountId
    this.times[i] = time
    this.peers[i] = this.peerOf(peer)
    this.agents[i] = this.agentValues.of(userAgent)
    this.referers[i] = referer === "" ? -1 : this.refererValues.of(referer)
    this.countries[i] = country === "" ? -1 : this.countryValues.of(country)
    this.count = i + 1
  }

  /** Empty again, for reuse; forgets the links it pointed to. */
  reset() {
    this.linkIds.fill(undefined, 0, this.count)
    this.accountIds.fill(undefined, 0, this.count)
    this.count = 0
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
   * wakes it (one field read per click); a round is sealed in it before the flusher takes it.
   */
  spool: RoundSpool | undefined = undefined
  spoolIdle = false

  constructor(
    readonly maxBuffered: number,
    readonly batchSize: number
  ) {
    this.current = new ClickRound(Math.min(batchSize, 16_384))
  }

  /** `peer` as HttpExchange.remoteAddressRaw gives it: 4 or 16 bytes, or the text. */
  record(
    linkId: string,
    accountId: string,
    time: number,
    peer: ArrayBuffer | string,
    userAgent: string,
    referer: string,
    country: string
  ): void {
    if (this.count + this.waiting >= this.maxBuffered) {
      this.dropped++
      return
    }
    this.current.push(linkId, accountId, time, peer, userAgent, referer, country)
    this.captured++
    if (this.spoolIdle) this.spool!.wake()
    if (++this.count >= this.batchSize && this.wake !== undefined) this.wake()
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
