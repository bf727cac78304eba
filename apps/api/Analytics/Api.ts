import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { DEFAULT_RANGE_DAYS, Dimensions, K_ANONYMITY, MAX_RANGE_DAYS } from "../../../domain/Analytics.js"
import * as E from "../Errors.js"
import { Authentication } from "../middleware/Authentication.js"
import { RequiredScope } from "../middleware/Scopes.js"
import { Envelope, IdPath, optional } from "../Shared.js"

const DATE_OR_INSTANT = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/

/** A real calendar day: Date.parse rolls 2024-02-30 over into March instead of refusing it. */
const isCalendarDate = (s: string) => {
  const [y, m, d] = s.slice(0, 10).split("-").map(Number) as [number, number, number]
  const date = new Date(Date.UTC(y, m - 1, d))
  return date.getUTCMonth() === m - 1 && date.getUTCDate() === d
}

const bound = (description: string) =>
  Schema.String.pipe(
    Schema.filter((s) => DATE_OR_INSTANT.test(s) && !Number.isNaN(Date.parse(s)) && isCalendarDate(s), {
      message: () => "must be an ISO 8601 date or a date-time with an offset (e.g. 2024-05-01T12:00:00Z)"
    })
  ).annotations({
    description,
    jsonSchema: {
      description,
      anyOf: [
        { type: "string", format: "date" },
        { type: "string", format: "date-time" }
      ]
    }
  })

export const AnalyticsParams = Schema.Struct({
  from: optional(
    bound(
      `Start of the range (inclusive): a date (\`2024-05-01\`, its midnight UTC) or a date-time with an offset. Default: ${DEFAULT_RANGE_DAYS} days before \`to\`. Clicks are kept per hour, so the range widens to whole buckets of the granularity.`
    )
  ),
  to: optional(
    bound(
      `End of the range (exclusive): a date covers that whole day (UTC). Default: now. At most ${MAX_RANGE_DAYS} days after \`from\`.`
    )
  ),
  granularity: optional(
    Schema.Literal("hour", "day").annotations({ description: "Bucket of the series: hour or UTC day (default day)." })
  ),
  dimensions: optional(
    Schema.String.annotations({
      description: `Comma-separated breakdowns to include, any of ${Dimensions.join(", ")}. Default: all four; empty: none.`
    })
  )
})

// A jsonSchema annotation replaces the generated schema, description included: repeat it there.
const count = (description?: string) =>
  Schema.Int.annotations({
    ...(description === undefined ? {} : { description }),
    jsonSchema: { type: "integer", minimum: 0, ...(description === undefined ? {} : { description }) }
  })
const instant = (description: string) =>
  Schema.String.annotations({ description, jsonSchema: { type: "string", format: "date-time", description } })

const ValueCount = Schema.Struct({
  value: Schema.String.annotations({
    description: `The value: an ISO 3166-1 alpha-2 country code or \`unknown\`; a referrer host or \`direct\`; a device class; a browser family. \`other\` holds every value with fewer than ${K_ANONYMITY} clicks.`
  }),
  clicks: count()
}).annotations({ identifier: "AnalyticsValue" })

const breakdown = (description: string) =>
  optional(
    Schema.Array(ValueCount).annotations({
      description: `${description} Largest first; \`other\` last. Present when asked for in \`dimensions\`.`
    })
  )

export const LinkAnalytics = Schema.Struct({
  link_id: Schema.String.annotations({ description: "The link." }),
  from: instant("Effective start of the range (inclusive), widened to a whole bucket."),
  to: instant("Effective end of the range (exclusive), widened to a whole bucket."),
  granularity: Schema.Literal("hour", "day"),
  totals: Schema.Struct({
    clicks: count("Clicks by people (bots excluded)."),
    unique_visitors: count(
      "Distinct visitors among those clicks: exact up to a few hundred a day, within about 1% beyond. A visitor is recognised within a UTC day only: the same person on two days counts twice."
    ),
    bot_clicks: count("Clicks by crawlers and link-preview fetchers, counted apart.")
  }).annotations({ identifier: "AnalyticsTotals" }),
  series: Schema.Array(
    Schema.Struct({
      start: instant("Start of the bucket (UTC)."),
      clicks: count(),
      unique_visitors: count()
    }).annotations({ identifier: "AnalyticsBucket" })
  ).annotations({ description: "Every bucket of the range in order, empty ones as zeros; bots excluded." }),
  breakdowns: Schema.Struct({
    country: breakdown("Clicks per country."),
    referrer: breakdown("Clicks per referrer host."),
    device: breakdown("Clicks per device class (desktop, mobile, tablet, other)."),
    browser: breakdown("Clicks per browser family.")
  }).annotations({
    description: `Bots excluded. Privacy: a value with fewer than ${K_ANONYMITY} clicks is never shown on its own; it is folded into \`other\`.`
  })
}).annotations({ identifier: "LinkAnalytics" })
export type LinkAnalytics = typeof LinkAnalytics.Type

export class AnalyticsApi extends HttpApiGroup.make("analytics")
  .add(
    HttpApiEndpoint.get("get", "/links/:id/analytics")
      .setPath(IdPath)
      .setUrlParams(AnalyticsParams)
      .addSuccess(Envelope(LinkAnalytics))
      .addError(E.InvalidRequest)
      .addError(E.NotFound)
      .annotate(RequiredScope, "analytics:read")
      .annotate(
        OpenApi.Description,
        "Aggregates only: no single click, IP address or user agent is ever returned. Clicks become visible within seconds of the redirect."
      )
      .annotate(OpenApi.Summary, "Read a Short Link's click analytics")
  )
  .middlewareEndpoints(Authentication) {}
