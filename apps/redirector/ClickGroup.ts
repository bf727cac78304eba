import { copyBytes, hasQuoteOrBackslash, viewOf } from "./Bytes.js"
import type { ClickRound } from "./ClickRound.js"

/**
 * JSON characters of an event's lists (its distinct links, countries, referrers and visitors)
 * at most: a visitor's entry is ~75 characters, a link's ~30, and each click adds at most ~25
 * to the columns, so an event stays under ~500 KB even with every click by another visitor on
 * another link (Kafka takes 1 MB per message by default).
 */
export const MAX_EVENT_LIST_CHARS = 400_000

/**
 * Small non-negative integers (link numbers) to the order they were first seen in (0, 1, …):
 * open addressing over one array of (number + 1, index) pairs, at most half full. An event's
 * links are up to thousands of link numbers in no order; a Map of them is a chain of objects
 * that misses the CPU's caches at nearly each new link, these pairs are a few hundred KB at
 * most, in one piece. A plain array of small integers, not a typed array: a round makes one
 * per account, and V8 allocates a typed array of more than 64 bytes outside its heap, at
 * ~0.6 µs each (bench/click-link-index.ts).
 */
export class FirstSeen {
  /** Pairs of (number + 1, index); 0: an empty slot. */
  private slots: Array<number> = new Array(2 * 8).fill(0)
  /** Slots - 1 (a power of 2 minus 1). */
  private mask = 7
  /** 32 - log2(slots): the multiplicative hash's high bits pick the slot. */
  private shift = 29
  size = 0

  /** The index of `n` (0 <= n < 2^31 - 1), the next one if it is new. */
  indexOf(n: number): number {
    const slots = this.slots
    const key = n + 1
    let s = Math.imul(key, 0x9e3779b1) >>> this.shift
    for (;;) {
      const k = slots[2 * s]!
      if (k === key) return slots[2 * s + 1]!
      if (k === 0) break
      s = (s + 1) & this.mask
    }
    const i = this.size++
    slots[2 * s] = key
    slots[2 * s + 1] = i
    if (2 * this.size > this.mask) this.grow()
    return i
  }

  private grow() {
    const old = this.slots
    this.mask = 2 * this.mask + 1
    this.shift--
    this.slots = new Array(2 * (this.mask + 1)).fill(0)
    for (let j = 0; j < old.length; j += 2) {
      const key = old[j]!
      if (key === 0) continue
      let s = Math.imul(key, 0x9e3779b1) >>> this.shift
      while (this.slots[2 * s] !== 0) s = (s + 1) & this.mask
      this.slots[2 * s] = key
      this.slots[2 * s + 1] = old[j + 1]!
    }
  }

  clear() {
    if (this.size > 0) this.slots.fill(0)
    this.size = 0
  }
}

/**
 * One account's clicks of a round, column by column (AccountClickColumnsData,
 * domain/Events.ts): per click its link's index, its time (after the click before it in
 * the event, whatever its link) and the indexes of its values in the event's lists, which
 * hold the JSON of each distinct value (link id included) once.
 */
export class ClickGroup {
  link: Array<number> = []
  at: Array<number> = []
  country: Array<number> = []
  referrer: Array<number> = []
  visitor: Array<number> = []
  lastAt = 0
  /** JSON characters in the lists so far. */
  listChars = 0
  /**
   * The links' ids as the event's JSON list, by their index in the event, copied byte for byte
   * from the round's run entries: no string per link until `take` makes one of the whole list.
   * The other lists hold their values' JSON.
   */
  private linkJson = Buffer.allocUnsafe(256)
  private linkJsonView = viewOf(this.linkJson)
  private linkJsonEnd = 0
  /** Link number (ClickRound.runLink) to its index in the event's list. */
  readonly links = new FirstSeen()
  readonly countries = new Map<string, number>()
  readonly referrers = new Map<string, number>()
  readonly visitors = new Map<string, number>()
  constructor(public accountId: string) {}
  /**
   * The group, empty (as `take` leaves it), for another account's clicks: the list of links and
   * its index keep the room they grew to, so a round's events on thousands of links do not grow
   * them again from nothing (~50 ns a click less where each is on another link).
   */
  reuse(accountId: string): this {
    this.accountId = accountId
    return this
  }
  private indexOf(values: Map<string, number>, json: string) {
    let i = values.get(json)
    if (i === undefined) {
      i = values.size
      values.set(json, i)
      this.listChars += json.length + 1
    }
    return i
  }
  /** The index in the event of the link of `round`'s run `r`, whose number is `link`. */
  linkIndex(link: number, round: ClickRound, r: number) {
    const known = this.links.size
    const i = this.links.indexOf(link)
    if (i === known) {
      const from = round.linkIdAt(r)
      const n = round.linkIdLength(r)
      // `,"id"`: the id's bytes (ids are visible ASCII: `storableId`) take at most 2 characters each.
      const room = this.linkJsonEnd + 3 + 2 * n
      if (room > this.linkJson.length) {
        const wider = Buffer.allocUnsafe(Math.max(this.linkJson.length * 2, room))
        this.linkJson.copy(wider, 0, 0, this.linkJsonEnd)
        this.linkJson = wider
        this.linkJsonView = viewOf(wider)
      }
      const start = this.linkJsonEnd
      let at = start
      if (i > 0) this.linkJson[at++] = 0x2c
      this.linkJsonEnd = this.appendLinkId(at, round, from, n)
      this.listChars += this.linkJsonEnd - start + 1
    }
    return i
  }
  /**
   * `"id"` at `at`, the id `n` bytes at `from` of the round's journal: its bytes as they are
   * (visible ASCII: `storableId`), unless JSON has to escape one (`"` or `\`: the service makes
   * no such id).
   */
  private appendLinkId(at: number, round: ClickRound, from: number, n: number) {
    const journal = round.journalView()
    if (hasQuoteOrBackslash(journal, from, n)) {
      const id = round.journal.toString("latin1", from, from + n)
      return at + this.linkJson.write(JSON.stringify(id), at, "latin1")
    }
    const out = this.linkJsonView
    out.setUint8(at, 0x22)
    copyBytes(journal, from, out, at + 1, n)
    out.setUint8(at + 1 + n, 0x22)
    return at + 2 + n
  }
  push(link: number, time: number, countryJson: string, referrerJson: string, visitorJson: string) {
    this.link.push(link)
    this.at.push(time - this.lastAt)
    this.lastAt = time
    this.country.push(this.indexOf(this.countries, countryJson))
    this.referrer.push(this.indexOf(this.referrers, referrerJson))
    this.visitor.push(this.indexOf(this.visitors, visitorJson))
  }
  /** The event's `data`; the group starts a new event. */
  take(): string {
    const list = (values: Map<string, number>) => [...values.keys()].join(",")
    const data =
      `{"links":[${this.linkJson.toString("latin1", 0, this.linkJsonEnd)}],` +
      `"link":[${this.link.join(",")}],` +
      `"countries":[${list(this.countries)}],` +
      `"referrer_hosts":[${list(this.referrers)}],"visitors":[${list(this.visitors)}],` +
      `"at":[${this.at.join(",")}],"country":[${this.country.join(",")}],` +
      `"referrer":[${this.referrer.join(",")}],"visitor":[${this.visitor.join(",")}]}`
    this.link = []
    this.at = []
    this.country = []
    this.referrer = []
    this.visitor = []
    this.lastAt = 0
    this.listChars = 0
    this.links.clear()
    this.linkJsonEnd = 0
    this.countries.clear()
    this.referrers.clear()
    this.visitors.clear()
    return data
  }
}
