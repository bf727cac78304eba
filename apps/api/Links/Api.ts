import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CustomSlug, DestinationUrl, Link as LinkModel, LinkStatus, shortUrl, Utm } from "../../../domain/Link.js"
import * as E from "../Errors.js"
import { Authentication } from "../middleware/Authentication.js"
import { IdempotencyKey } from "../middleware/Idempotency.js"
import { JsonBody } from "../middleware/JsonBody.js"
import { RequiredScope } from "../middleware/Scopes.js"
import { Cursor, Envelope, IdPath, intFromString, Limit, optional, Page, SuccessDoc } from "../Shared.js"

/** The API record of a link: the model (domain/Link.ts) under the contract's names, with its short URLs. */
export const Link = Schema.Struct({
  id: Schema.String.annotations({ description: "Link identifier; begins with link_." }),
  slug: Schema.String,
  short_url: Schema.String.annotations({
    description: "{short_base}/{slug}",
    jsonSchema: { type: "string", format: "uri" }
  }),
  destination_url: Schema.String.annotations({ jsonSchema: { type: "string", format: "uri" } }),
  publication_status: LinkModel.fields.status,
  created_at: Schema.String.annotations({ jsonSchema: { type: "string", format: "date-time" } }),
  updated_at: Schema.String.annotations({ jsonSchema: { type: "string", format: "date-time" } }),
  expires_at: Schema.NullOr(Schema.String).annotations({
    description: "Set through /links/{id}/options; null: never expires."
  }),
  utm: LinkModel.fields.utm,
  short_urls: Schema.Array(Schema.String).annotations({
    description:
      "The canonical short URL first, then one per verified custom domain of the account (`{scheme}://{hostname}/{slug}`, the scheme of {short_base}), oldest verification first."
  })
}).annotations({ identifier: "Link" })
export type Link = typeof Link.Type

/**
 * A link's API record: its short URL under `shortBase` ({short_base}), then one under each base
 * of `customBases` (the account's verified custom domains).
 */
export const toApiLink =
  (shortBase: string, customBases: ReadonlyArray<string> = []) =>
  (link: LinkModel): Link => {
    const url = shortUrl(shortBase, link)
    return {
      id: link.id,
      slug: link.slug,
      short_url: url,
      destination_url: link.destinationUrl,
      publication_status: link.status,
      created_at: link.createdAt.toISOString(),
      updated_at: link.updatedAt.toISOString(),
      expires_at: link.expiresAt?.toISOString() ?? null,
      utm: link.utm,
      short_urls: [url, ...customBases.map((base) => shortUrl(base, link))]
    }
  }

export const CreateLink = Schema.Struct({
  url: DestinationUrl,
  custom_slug: optional(CustomSlug)
}).annotations({ identifier: "CreateLink", parseOptions: { onExcessProperty: "error", errors: "all" } })

export const UpdateLink = Schema.Struct({
  url: DestinationUrl
}).annotations({ identifier: "UpdateLink", parseOptions: { onExcessProperty: "error", errors: "all" } })

/** A real calendar day: Date.parse rolls 2024-02-30 over into March instead of refusing it. */
const isCalendarDate = (s: string) => {
  const [y, m, d] = s.slice(0, 10).split("-").map(Number) as [number, number, number]
  const date = new Date(Date.UTC(y, m - 1, d))
  return date.getUTCMonth() === m - 1 && date.getUTCDate() === d
}

const IsoInstant = Schema.String.pipe(
  Schema.filter(
    (s) =>
      // A date-time names its offset (Z or ±hh:mm): never the server's local time.
      /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/.test(s) &&
      !Number.isNaN(Date.parse(s)) &&
      isCalendarDate(s),
    { message: () => "must be an ISO 8601 date or a date-time with an offset (e.g. 2024-05-01T12:00:00Z)" }
  )
).annotations({ jsonSchema: { type: "string", format: "date-time" } })

/** A search bound: a date or a date-time, documented as both. */
const searchBound = (description: string) =>
  IsoInstant.annotations({
    description,
    jsonSchema: {
      description: `${description} A date (\`2024-05-01\`, midnight UTC) or a date-time (\`2024-05-01T12:30:00Z\`).`,
      anyOf: [
        { type: "string", format: "date" },
        { type: "string", format: "date-time" }
      ]
    }
  })

/** The search filters of GET /links, which GET /links.csv takes too. */
const linkSearchFields = {
  q: optional(
    Schema.String.pipe(
      Schema.maxLength(2048, { message: () => "must be at most 2048 characters" }),
      Schema.filter((s) => !s.includes("\u0000") || "must not contain NUL characters")
    ).annotations({
      description: "Case-insensitive substring of the slug or the destination URL.",
      jsonSchema: {
        type: "string",
        maxLength: 2048,
        description: "Case-insensitive substring of the slug or the destination URL (`%` and `_` match themselves)."
      }
    })
  ),
  status: optional(LinkStatus),
  created_after: optional(searchBound("Only links created after this instant (exclusive).")),
  created_before: optional(searchBound("Only links created before this instant (exclusive)."))
}

export const ListLinksParams = Schema.Struct({
  cursor: optional(Cursor),
  limit: optional(Limit),
  ...linkSearchFields
})

export const ExportLinksParams = Schema.Struct(linkSearchFields)

const intParam = (min: number, max: number, description: string) =>
  intFromString(min, max).annotations({ description, jsonSchema: { type: "integer", minimum: min, maximum: max } })

export const QrParams = Schema.Struct({
  format: optional(Schema.Literal("png", "svg").annotations({ description: "Default png." })),
  size: optional(intParam(64, 2048, "Image width and height in pixels, 64 to 2048 (default 512).")),
  margin: optional(intParam(0, 16, "Quiet zone in modules, 0 to 16 (default 4).")),
  ecc: optional(Schema.Literal("L", "M", "Q", "H").annotations({ description: "Error correction level (default M)." })),
  domain: optional(
    Schema.String.annotations({
      description: "A verified custom domain of the account to encode instead of the canonical short host."
    })
  )
})

export const LinkOptions = Schema.Struct({
  utm: Schema.NullOr(Utm).annotations({
    description: "UTM parameters added to the destination on redirect, without replacing ones it already has."
  }),
  expires_at: Schema.NullOr(Schema.String).annotations({
    description: "After this instant the short URL answers 404; null: never.",
    jsonSchema: { type: ["string", "null"], format: "date-time" }
  })
}).annotations({ identifier: "LinkOptions" })

/** A link's options record (GET and PATCH /links/{id}/options). */
export const toApiLinkOptions = (link: LinkModel): typeof LinkOptions.Type => ({
  utm: link.utm,
  expires_at: link.expiresAt?.toISOString() ?? null
})

export const UpdateLinkOptions = Schema.Struct({
  utm: optional(Schema.NullOr(Utm)),
  expires_at: optional(
    Schema.NullOr(
      IsoInstant.pipe(Schema.filter((s) => Date.parse(s) > Date.now() || "must be in the future"))
    ).annotations({ jsonSchema: { type: ["string", "null"], format: "date-time" } })
  )
})
  .pipe(Schema.filter((o) => Object.keys(o).length > 0 || "must set utm, expires_at or both"))
  .annotations({ identifier: "UpdateLinkOptions", parseOptions: { onExcessProperty: "error", errors: "all" } })

const scope = RequiredScope

export class LinksApi extends HttpApiGroup.make("links")
  .add(
    HttpApiEndpoint.post("create", "/links")
      .setPayload(CreateLink)
      .addSuccess(Envelope(Link), { status: 201 })
      .addError(E.SlugTaken)
      .addError(E.UrlNotAllowed)
      .addError(E.QuotaExceeded)
      .annotate(scope, "links:write")
      .annotate(OpenApi.Summary, "Create a Short Link")
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.get("list", "/links")
      .setUrlParams(ListLinksParams)
      .addSuccess(Page(Link))
      .addError(E.InvalidRequest)
      .annotate(scope, "links:read")
      .annotate(OpenApi.Summary, "List and search Short Links, newest first")
  )
  .add(
    HttpApiEndpoint.get("export", "/links.csv")
      .setUrlParams(ExportLinksParams)
      .addSuccess(
        HttpApiSchema.Text({ contentType: "text/csv" }).annotations({
          description:
            "RFC 4180 CSV with a header row and one row per link of the account that matches the filters (disabled links too, unless `status` leaves them out), newest first, streamed."
        })
      )
      .addError(E.InvalidRequest)
      .annotate(scope, "links:read")
      .annotate(SuccessDoc, {
        headers: { "Content-Disposition": 'Always `attachment; filename="links.csv"`.' }
      })
      .annotate(OpenApi.Summary, "Export Short Links as CSV, with the search filters of GET /links")
  )
  .add(
    HttpApiEndpoint.get("get", "/links/:id")
      .setPath(IdPath)
      .addSuccess(Envelope(Link))
      .addError(E.NotFound)
      .annotate(scope, "links:read")
      .annotate(OpenApi.Summary, "Read a Short Link")
  )
  .add(
    HttpApiEndpoint.patch("update", "/links/:id")
      .setPath(IdPath)
      .setPayload(UpdateLink)
      .addSuccess(Envelope(Link))
      .addError(E.NotFound)
      .addError(E.LinkDisabled)
      .addError(E.UrlNotAllowed)
      .annotate(scope, "links:write")
      .annotate(OpenApi.Summary, "Change a Short Link's destination")
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.del("disable", "/links/:id")
      .setPath(IdPath)
      .addSuccess(Envelope(Link))
      .addError(E.NotFound)
      .annotate(scope, "links:write")
      .annotate(OpenApi.Summary, "Disable a Short Link (it answers 404 on the short host from then on)")
      .middleware(IdempotencyKey)
  )
  .add(
    HttpApiEndpoint.get("qr", "/links/:id/qr")
      .setPath(IdPath)
      .setUrlParams(QrParams)
      .addSuccess(
        HttpApiSchema.Uint8Array({ contentType: "image/png" }).annotations({
          description: "PNG by default; image/svg+xml with format=svg."
        })
      )
      .addError(E.InvalidRequest)
      .addError(E.NotFound)
      .annotate(scope, "links:read")
      .annotate(SuccessDoc, {
        content: { "image/svg+xml": { schema: { type: "string", description: "An SVG document (format=svg)." } } },
        headers: { "Content-Disposition": 'Always `inline; filename="<slug>.<png|svg>"`.' }
      })
      .annotate(OpenApi.Summary, "Download the QR code of a Short Link")
  )
  .add(
    HttpApiEndpoint.get("getOptions", "/links/:id/options")
      .setPath(IdPath)
      .addSuccess(Envelope(LinkOptions))
      .addError(E.NotFound)
      .annotate(scope, "links:read")
      .annotate(OpenApi.Summary, "Read a Short Link's options (UTM parameters, expiry)")
  )
  .add(
    HttpApiEndpoint.patch("updateOptions", "/links/:id/options")
      .setPath(IdPath)
      .setPayload(UpdateLinkOptions)
      .addSuccess(Envelope(LinkOptions))
      .addError(E.NotFound)
      .addError(E.LinkDisabled)
      .addError(E.QuotaExceeded)
      .annotate(scope, "links:write")
      .annotate(OpenApi.Summary, "Change a Short Link's options; a field left out is kept, null clears it")
      .middleware(JsonBody)
      .middleware(IdempotencyKey)
  )
  .middlewareEndpoints(Authentication) {}
