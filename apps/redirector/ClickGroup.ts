import type { ClickRound } from "./ClickRound.js"

/**
 * JSON characters of an event's lists (its distinct links, countries, referrers and visitors)
 * at most: a visitor's entry is ~75 characters, a link's ~30, and each click adds at most ~25
 * to the columns, so an event stays under ~500 KB even with every click by another visitor on
 * another link (Kafka takes 1 MB per message by default).
 */
export const MAX_EVENT_LIST_CHARS = 400_000

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
  /** The links' ids, by their index in the event (JSON at the end); the other lists hold their values' JSON. */
  readonly linkIds: Array<string> = []
  /** Link number (ClickRound.runLink) to its index in `linkIds`. */
  readonly links = new Map<number, number>()
  readonly countries = new Map<string, number>()
  readonly referrers = new Map<string, number>()
  readonly visitors = new Map<string, number>()
  constructor(readonly accountId: string) {}
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
    let i = this.links.get(link)
    if (i === undefined) {
      i = this.linkIds.length
      const id = round.linkIdOf(r)
      this.linkIds.push(id)
      this.links.set(link, i)
      this.listChars += id.length + 3
    }
    return i
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
      `{"links":${JSON.stringify(this.linkIds)},` +
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
    this.linkIds.length = 0
    this.countries.clear()
    this.referrers.clear()
    this.visitors.clear()
    return data
  }
}
