import { Effect } from "effect"
import { EventLog, type LogRecord, type OutgoingRecord } from "../../domain/EventLog.js"
import {
  type BatchedClick,
  ClickEvent,
  type ClickRecorded,
  type ClicksRecorded,
  type ClicksRecordedV2,
  type ClicksRecordedV3,
  type LinkedClick,
  linkedClicks,
  Topics
} from "../../domain/Events.js"

/**
 * Every click of a link in clicks.v1, read from the beginning with the catalogue's schema, each
 * event once by its id as a consumer counts them (docs/events.md: delivery is at least once; a
 * publish retried after an acknowledgement that came late, a close interrupting it say,
 * appends the same event again): the click with its event and the raw record beside it.
 */
export const clicksInLog = (linkId: string) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const found: Array<{
      click: LinkedClick
      event: Extract<ClickEvent, { type: "clicks.recorded" }>
      record: LogRecord
    }> = []
    const seen = new Set<string>()
    yield* log.read({ topic: Topics.clicks, startAt: { _tag: "Beginning" } }, ClickEvent, (batch) =>
      Effect.sync(() => {
        for (const { event, record } of batch.events) {
          if (event.type !== "clicks.recorded" || seen.has(event.id)) continue
          seen.add(event.id)
          for (const click of linkedClicks(event.data))
            if (click.link_id === linkId) found.push({ click, event, record })
        }
      })
    )
    return found
  })

interface Head {
  readonly id: string
  readonly occurred_at: string
  readonly account_id: string
}

/** Clicks column by column (clicks.recorded version 2), written here independently of the redirector. */
const columns = (linkId: string, clicks: ReadonlyArray<BatchedClick>): ClicksRecordedV2["data"] => {
  const lists = {
    countries: [] as Array<string | null>,
    referrer_hosts: [] as Array<string | null>,
    visitors: [] as Array<ClicksRecordedV2["data"]["visitors"][number]>
  }
  const indexOf = <A>(list: Array<A>, value: A) => {
    const i = list.findIndex((v) => JSON.stringify(v) === JSON.stringify(value))
    return i >= 0 ? i : list.push(value) - 1
  }
  let last = 0
  return {
    link_id: linkId,
    ...lists,
    at: clicks.map((c) => {
      const d = c.at - last
      last = c.at
      return d
    }),
    country: clicks.map((c) => indexOf(lists.countries, c.country)),
    referrer: clicks.map((c) => indexOf(lists.referrer_hosts, c.referrer_host)),
    visitor: clicks.map((c) =>
      indexOf(lists.visitors, { visitor: c.visitor, device: c.device, browser: c.browser, bot: c.bot })
    )
  }
}

/** One clicks.recorded event of a link, in either version of its layout. */
export const clicksRecorded = (
  version: 1 | 2,
  head: Head,
  linkId: string,
  clicks: ReadonlyArray<BatchedClick>
): ClicksRecorded | ClicksRecordedV2 =>
  version === 1
    ? { ...head, type: "clicks.recorded", version, data: { link_id: linkId, clicks } }
    : { ...head, type: "clicks.recorded", version, data: columns(linkId, clicks) }

/** Clicks of several links column by column (clicks.recorded version 3), written here independently of the redirector. */
export const clicksRecordedV3 = (head: Head, clicks: ReadonlyArray<LinkedClick>): ClicksRecordedV3 => {
  const links: Array<string> = []
  const link = clicks.map((c) => {
    const i = links.indexOf(c.link_id)
    return i >= 0 ? i : links.push(c.link_id) - 1
  })
  const { link_id: _, ...data } = columns("", clicks)
  return { ...head, type: "clicks.recorded", version: 3, data: { links, link, ...data } }
}

/**
 * The same clicks as a redirector publishes them, ids derived from the first click's: version 3
 * (the default) one event per account in click order, keyed by the account; versions 1 and 2
 * one event per link, keyed by the link.
 */
export const toBatchRecords = (events: ReadonlyArray<ClickRecorded>, version: 1 | 2 | 3 = 3): Array<OutgoingRecord> => {
  const groups = new Map<string, Array<ClickRecorded>>()
  for (const e of events) {
    const key = version === 3 ? e.account_id : e.data.link_id
    groups.set(key, [...(groups.get(key) ?? []), e])
  }
  return [...groups.entries()].map(([key, mine]) => {
    const head = { id: `batch_${mine[0]!.id}`, occurred_at: mine[0]!.occurred_at, account_id: mine[0]!.account_id }
    const clicks = mine.map(({ occurred_at, data }) => ({ ...data, at: Date.parse(occurred_at) }))
    const event =
      version === 3
        ? clicksRecordedV3(head, clicks)
        : clicksRecorded(
            version,
            head,
            key,
            clicks.map(({ link_id: _, ...click }) => click)
          )
    return { key, value: JSON.stringify(event) }
  })
}
