import { Schema } from "effect"
import { envelope } from "./EventEnvelope.js"

export const ClickEventData = Schema.Struct({
  link_id: Schema.String.annotations({ description: "The link followed; also the message key." }),
  country: Schema.NullOr(Schema.String).annotations({
    description: "ISO 3166-1 alpha-2 code from the trusted proxy header, or null when unknown."
  }),
  referrer_host: Schema.NullOr(Schema.String).annotations({
    description: "Host name of the Referer (no path, no query), or null for a direct visit."
  }),
  device: Schema.Literal("desktop", "mobile", "tablet", "other"),
  browser: Schema.String.annotations({ description: "Browser family (Chrome, Safari, Firefox, …) or `other`." }),
  bot: Schema.Boolean.annotations({
    description: "A crawler or link-preview fetcher: counted apart, never in the totals."
  }),
  visitor: Schema.String.annotations({
    description:
      "16 hex digits: a keyed hash of the visitor under a secret that rotates daily and is never stored with the data; it counts unique visitors within a day and cannot be linked across days or back to a person."
  })
}).annotations({
  identifier: "Click",
  description: "One redirect of a GET request. No IP address and no user agent are recorded."
})

/** The most clicks one clicks.recorded event may carry (the redirector sends at most 4000). */
export const MAX_CLICKS_PER_EVENT = 10_000

/** One click inside a clicks.recorded batch: the fields of a click without the link id. */
export const BatchedClick = Schema.Struct({
  at: Schema.Number.pipe(Schema.int(), Schema.nonNegative()).annotations({
    description: "Time of the click, milliseconds since the epoch (UTC)."
  }),
  country: ClickEventData.fields.country,
  referrer_host: ClickEventData.fields.referrer_host,
  device: ClickEventData.fields.device,
  browser: ClickEventData.fields.browser,
  bot: ClickEventData.fields.bot,
  visitor: ClickEventData.fields.visitor
}).annotations({
  identifier: "BatchedClick",
  description: "One redirect of a GET request. No IP address and no user agent are recorded."
})
export type BatchedClick = typeof BatchedClick.Type

export const ClicksEventData = Schema.Struct({
  link_id: Schema.String.annotations({ description: "The link followed; also the message key." }),
  clicks: Schema.Array(BatchedClick)
    .pipe(Schema.minItems(1), Schema.maxItems(MAX_CLICKS_PER_EVENT))
    .annotations({
      description: `The link's clicks of one flush of one redirector, in the order they happened; 1 to ${MAX_CLICKS_PER_EVENT}.`
    })
}).annotations({ identifier: "LinkClicks", description: "Clicks on one link." })

export const ClicksRecorded = envelope("clicks.recorded", ClicksEventData).annotations({
  description:
    "Version 1, no longer written: the clicks of one link as one object each. Consumers still read it (the topic may hold it). `occurred_at` is when the batch was made, each click has its own `at`; `account_id` is the link's owner."
})
export type ClicksRecorded = typeof ClicksRecorded.Type

/** One visitor of a clicks.recorded (version 2) event: what its clicks share. */
export const ClickVisitor = Schema.Struct({
  visitor: ClickEventData.fields.visitor,
  device: ClickEventData.fields.device,
  browser: ClickEventData.fields.browser,
  bot: ClickEventData.fields.bot
}).annotations({
  identifier: "ClickVisitor",
  description: "One user agent at one address on one UTC day, as its hash and classes: no address, no user agent."
})
export type ClickVisitor = typeof ClickVisitor.Type

const clickIndexes = (of: string) =>
  Schema.Array(Schema.Number.pipe(Schema.int(), Schema.nonNegative())).annotations({
    description: `Per click, in order: the index of its value in \`${of}\`.`
  })

/**
 * Why a clicks.recorded (version 2 or 3) payload is inconsistent, or undefined when it is not:
 * every column has one entry per click (1 to MAX_CLICKS_PER_EVENT), every index points
 * into its list, the times stay safe integers, and (version 3) each link is listed once.
 */
export const clickColumnsProblem = (d: {
  readonly links?: ReadonlyArray<string>
  readonly link?: ReadonlyArray<number>
  readonly at: ReadonlyArray<number>
  readonly country: ReadonlyArray<number>
  readonly referrer: ReadonlyArray<number>
  readonly visitor: ReadonlyArray<number>
  readonly countries: ReadonlyArray<unknown>
  readonly referrer_hosts: ReadonlyArray<unknown>
  readonly visitors: ReadonlyArray<unknown>
}): string | undefined => {
  const n = d.at.length
  if (n < 1 || n > MAX_CLICKS_PER_EVENT) return `at: 1 to ${MAX_CLICKS_PER_EVENT} clicks`
  if (d.country.length !== n || d.referrer.length !== n || d.visitor.length !== n) {
    return "at, country, referrer and visitor must have one entry per click"
  }
  const { links, link } = d
  if (links !== undefined && link !== undefined) {
    if (link.length !== n) return "link must have one entry per click"
    if (new Set(links).size !== links.length) return "links: each link once"
    for (let i = 0; i < n; i++) if (link[i]! >= links.length) return "link: an index past the end of links"
  }
  let at = 0
  for (let i = 0; i < n; i++) {
    at += d.at[i]!
    if (!Number.isSafeInteger(at)) return "at: the times must be safe integers"
    if (d.country[i]! >= d.countries.length) return "country: an index past the end of countries"
    if (d.referrer[i]! >= d.referrer_hosts.length) return "referrer: an index past the end of referrer_hosts"
    if (d.visitor[i]! >= d.visitors.length) return "visitor: an index past the end of visitors"
  }
  return undefined
}

/** The columns versions 2 and 3 share: each distinct value once, then per click its time and indexes. */
const valueColumns = (order: string) => ({
  countries: Schema.Array(ClickEventData.fields.country).annotations({
    description: "The distinct countries of the clicks (ISO 3166-1 alpha-2, or null when unknown)."
  }),
  referrer_hosts: Schema.Array(ClickEventData.fields.referrer_host).annotations({
    description: "The distinct referrer hosts of the clicks (null for a direct visit)."
  }),
  visitors: Schema.Array(ClickVisitor).annotations({ description: "The distinct visitors of the clicks." }),
  at: Schema.Array(Schema.Number.pipe(Schema.int())).annotations({
    description: `Per click, ${order} (1 to ${MAX_CLICKS_PER_EVENT} clicks): its time, the first in milliseconds since the epoch (UTC), each next one in milliseconds after the click before it (negative only if the clock went back).`
  }),
  country: clickIndexes("countries"),
  referrer: clickIndexes("referrer_hosts"),
  visitor: clickIndexes("visitors")
})

export const ClickColumnsData = Schema.Struct({
  link_id: Schema.String.annotations({ description: "The link followed; also the message key." }),
  ...valueColumns("in the order they happened")
})
  .pipe(Schema.filter((d) => clickColumnsProblem(d) ?? true))
  .annotations({
    identifier: "LinkClickColumns",
    description:
      "Clicks on one link, column by column: one entry per click in `at`, `country`, `referrer` and `visitor`."
  })
export type ClickColumnsData = typeof ClickColumnsData.Type

export const ClicksRecordedV2 = envelope("clicks.recorded", ClickColumnsData, 2).annotations({
  description:
    "Version 2, no longer written: the clicks of one link per flush of a redirector, keyed by the link id, column by column as in version 3 without `links` and `link` (every click is on `link_id`). Consumers still read it (the topic may hold it)."
})
export type ClicksRecordedV2 = typeof ClicksRecordedV2.Type

export const AccountClickColumnsData = Schema.Struct({
  links: Schema.Array(Schema.String).annotations({
    description: "The distinct links of the clicks, each once."
  }),
  link: clickIndexes("links"),
  ...valueColumns("in the order the redirector took them, whatever their link")
})
  .pipe(Schema.filter((d) => clickColumnsProblem(d) ?? true))
  .annotations({
    identifier: "AccountClickColumns",
    description:
      "Clicks on the links of one account, column by column: one entry per click in `link`, `at`, `country`, `referrer` and `visitor`."
  })
export type AccountClickColumnsData = typeof AccountClickColumnsData.Type

export const ClicksRecordedV3 = envelope("clicks.recorded", AccountClickColumnsData, 3).annotations({
  description:
    "Browsers followed short links (GET; HEAD is not a click): the redirector publishes one event per account per flush (every 100 ms, or sooner under load; a busy account's clicks in several events), its clicks column by column. Click i is on link `links[link[i]]`, happened at the sum of `at[0..i]`, from `countries[country[i]]`, with referrer host `referrer_hosts[referrer[i]]`, by `visitors[visitor[i]]`. `occurred_at` is when the batch was made; `account_id` is the links' owner and the message key. Version 3 is what redirectors write; versions 2 and 1 (one event per link, keyed by the link id) are still read. The key is the account, not the link: a consumer that needs one link's clicks in order must order them by `at`, not rely on the partition."
})
export type ClicksRecordedV3 = typeof ClicksRecordedV3.Type

/** The data of a clicks.recorded event of any version. */
export type ClicksData = AccountClickColumnsData | ClickColumnsData | typeof ClicksEventData.Type

/** The clicks of a clicks.recorded event of any version, one object each (without their link), in order. */
export const batchedClicks = (data: ClicksData): ReadonlyArray<BatchedClick> => {
  if ("clicks" in data) return data.clicks
  const clicks: Array<BatchedClick> = []
  let at = 0
  for (let i = 0; i < data.at.length; i++) {
    at += data.at[i]!
    const v = data.visitors[data.visitor[i]!]!
    clicks.push({
      at,
      country: data.countries[data.country[i]!]!,
      referrer_host: data.referrer_hosts[data.referrer[i]!]!,
      device: v.device,
      browser: v.browser,
      bot: v.bot,
      visitor: v.visitor
    })
  }
  return clicks
}

/** A click with its link. */
export type LinkedClick = BatchedClick & { readonly link_id: string }

/** The link of click i of a clicks.recorded event of any version. */
export const clickLink = (data: ClicksData, i: number): string =>
  "links" in data ? data.links[data.link[i]!]! : data.link_id

/** The clicks of a clicks.recorded event of any version, each with its link, in order. */
export const linkedClicks = (data: ClicksData): ReadonlyArray<LinkedClick> =>
  batchedClicks(data).map((c, i) => ({ link_id: clickLink(data, i), ...c }))

export const ClickRecorded = envelope("click.recorded", ClickEventData).annotations({
  description:
    "Legacy, no longer written: one click per event, as redirectors before `clicks.recorded` published it. Consumers still read it (the topic may hold it). `occurred_at` is the time of the click; `account_id` the link's owner."
})
export type ClickRecorded = typeof ClickRecorded.Type

/** Topic clicks.v1, keyed by account id (versions 1 and 2 of clicks.recorded and click.recorded: by link id). */
export const ClickEvent = Schema.Union(ClicksRecordedV3, ClicksRecordedV2, ClicksRecorded, ClickRecorded).annotations({
  identifier: "ClickEvent",
  description:
    "Topic clicks.v1, keyed by account id (versions 1 and 2 of clicks.recorded and click.recorded: by link id)."
})
export type ClickEvent = typeof ClickEvent.Type
