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
 * Why a clicks.recorded (version 2) payload is inconsistent, or undefined when it is not:
 * every column has one entry per click (1 to MAX_CLICKS_PER_EVENT), every index points
 * into its list, and the times stay safe integers.
 */
export const clickColumnsProblem = (d: {
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

export const ClickColumnsData = Schema.Struct({
  link_id: Schema.String.annotations({ description: "The link followed; also the message key." }),
  countries: Schema.Array(ClickEventData.fields.country).annotations({
    description: "The distinct countries of the clicks (ISO 3166-1 alpha-2, or null when unknown)."
  }),
  referrer_hosts: Schema.Array(ClickEventData.fields.referrer_host).annotations({
    description: "The distinct referrer hosts of the clicks (null for a direct visit)."
  }),
  visitors: Schema.Array(ClickVisitor).annotations({ description: "The distinct visitors of the clicks." }),
  at: Schema.Array(Schema.Number.pipe(Schema.int())).annotations({
    description: `Per click, in the order they happened (1 to ${MAX_CLICKS_PER_EVENT} clicks): its time, the first in milliseconds since the epoch (UTC), each next one in milliseconds after the click before it (negative only if the clock went back).`
  }),
  country: clickIndexes("countries"),
  referrer: clickIndexes("referrer_hosts"),
  visitor: clickIndexes("visitors")
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
    "Browsers followed a short link (GET; HEAD is not a click): the redirector publishes one event per link per flush (every 100 ms, or sooner under load), its clicks column by column. Click i happened at the sum of `at[0..i]`, from `countries[country[i]]`, with referrer host `referrer_hosts[referrer[i]]`, by `visitors[visitor[i]]`. `occurred_at` is when the batch was made; `account_id` is the link's owner. What repeats is written once: an event is about a tenth of version 1's size."
})
export type ClicksRecordedV2 = typeof ClicksRecordedV2.Type

/** The clicks of a clicks.recorded event of either version, one object each, in order. */
export const batchedClicks = (data: ClickColumnsData | typeof ClicksEventData.Type): ReadonlyArray<BatchedClick> => {
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

export const ClickRecorded = envelope("click.recorded", ClickEventData).annotations({
  description:
    "Legacy, no longer written: one click per event, as redirectors before `clicks.recorded` published it. Consumers still read it (the topic may hold it). `occurred_at` is the time of the click; `account_id` the link's owner."
})
export type ClickRecorded = typeof ClickRecorded.Type

/** Topic clicks.v1, keyed by link id. */
export const ClickEvent = Schema.Union(ClicksRecordedV2, ClicksRecorded, ClickRecorded).annotations({
  identifier: "ClickEvent",
  description: "Topic clicks.v1, keyed by link id."
})
export type ClickEvent = typeof ClickEvent.Type
