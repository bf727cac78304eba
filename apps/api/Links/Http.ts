import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Chunk, Effect, Either, Option, Stream } from "effect"
import * as QRCode from "qrcode"
import type { Principal } from "../../../domain/Account.js"
import { Topics } from "../../../domain/Events.js"
import {
  effectivePort,
  isLinkId,
  isLoopbackHost,
  isReservedSlug,
  type LinkFilter,
  type LinkRow
} from "../../../domain/Link.js"
import { expiryCeiling, expiryWithinPlan, linkQuota, quotaDetail, usagePeriod } from "../../../domain/Plan.js"
import { LinkRepo } from "../../../domain/ports/LinkRepo.js"
import { Outbox } from "../../../domain/ports/Outbox.js"
import { UsageRepo } from "../../../domain/ports/UsageRepo.js"
import { AppConfig } from "../../../infra/AppConfig.js"
import { newId, newSlug } from "../../../infra/Ids.js"
import { Plans } from "../../../infra/Plans.js"
import { Api } from "../Api.js"
import * as E from "../Errors.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { envelope, keysetPage } from "../Shared.js"
import type { ExportLinksParams, Link } from "./Api.js"

/** The search filters of GET /links and GET /links.csv, as the repository takes them. */
const toFilter = (params: typeof ExportLinksParams.Type): LinkFilter => ({
  q: params.q,
  status: params.status,
  createdAfter: params.created_after === undefined ? undefined : new Date(params.created_after),
  createdBefore: params.created_before === undefined ? undefined : new Date(params.created_before)
})

const csvField = (value: string) => (/[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value)
const CSV_COLUMNS = [
  "id",
  "slug",
  "short_url",
  "destination_url",
  "publication_status",
  "created_at",
  "updated_at",
  "expires_at"
] as const

export const LinksHttp = HttpApiBuilder.group(Api, "links", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const links = yield* LinkRepo
    const outbox = yield* Outbox
    const config = yield* AppConfig
    const plans = yield* Plans
    const usage = yield* UsageRepo

    /** host[:port], lower case, without the trailing dot a fully qualified name may carry. */
    const hostKey = (url: URL) => {
      const name = url.hostname.toLowerCase().replace(/\.+$/, "")
      return url.port === "" ? name : `${name}:${url.port}`
    }
    const ownBases = [config.shortBase, config.apiBase, config.imageHost].map((u) => new URL(u))
    const ownHosts = new Set(ownBases.map(hostKey))
    const ownPorts = new Set(ownBases.map(effectivePort))

    /**
     * The caller's link, or 404 (another account's link is 404 too). An id of another shape
     * names no link and must not reach SQL: PostgreSQL refuses NUL bytes.
     */
    const owned = (id: string, forUpdate = false) =>
      Effect.gen(function* () {
        const principal = yield* CurrentPrincipal
        const row = !isLinkId(id)
          ? Option.none()
          : yield* forUpdate ? links.findForUpdate(principal.accountId, id) : links.find(principal.accountId, id)
        if (Option.isNone(row)) return yield* E.fail(E.NotFound, "No such link.")
        return row.value
      })

    /** The caller's link, locked for this transaction, if it may still change. */
    const changeable = (id: string) =>
      Effect.flatMap(owned(id, true), (row) =>
        row.status === "disabled" ? E.fail(E.LinkDisabled, "A disabled link cannot be changed.") : Effect.succeed(row)
      )

    const toApi = (row: LinkRow): Link => {
      const shortUrl = `${config.shortBase}/${row.slug}`
      return {
        id: row.id,
        slug: row.slug,
        short_url: shortUrl,
        destination_url: row.destinationUrl,
        publication_status: row.status,
        created_at: row.createdAt.toISOString(),
        updated_at: row.updatedAt.toISOString(),
        expires_at: row.expiresAt?.toISOString() ?? null,
        utm: row.utm,
        short_urls: [shortUrl]
      }
    }

    const toOptions = (row: LinkRow) => ({ utm: row.utm, expires_at: row.expiresAt?.toISOString() ?? null })

    const eventData = (row: LinkRow) => {
      const { short_url: _, short_urls: __, publication_status, ...rest } = toApi(row)
      return { ...rest, publication_status }
    }

    /**
     * Destinations may not point back at this service: a short link to a short link loops.
     * That is one of its configured hosts, or a loopback name or address (in any notation the
     * URL parser normalizes) on one of its ports. Other private addresses are fine: links are
     * followed by browsers, never fetched by the server.
     */
    const checkDestination = (destination: string) => {
      const url = new URL(destination)
      if (ownHosts.has(hostKey(url))) {
        return E.fail(
          E.UrlNotAllowed,
          "The destination is one of this service's own hosts.",
          "url: must not point to this service"
        )
      }
      if (isLoopbackHost(url.hostname) && ownPorts.has(effectivePort(url))) {
        return E.fail(
          E.UrlNotAllowed,
          "The destination is a loopback address on one of this service's ports.",
          "url: must not point to this service (a loopback host on one of its ports)"
        )
      }
      return Effect.void
    }

    /**
     * An expires_at further ahead than the plan's link_expiry_max_days is 403 quota_exceeded
     * (a numeric plan limit, like the other quotas). Unmetered Partner Keys skip the ceiling.
     */
    const checkExpiryCeiling = (principal: Principal, expiresAt: string) => {
      const plan = plans.limits(principal.plan)
      const now = Date.now()
      if (expiryWithinPlan(plan, principal.unmetered, Date.parse(expiresAt), now)) return Effect.void
      const ceiling = expiryCeiling(plan, principal.unmetered, now) ?? now
      return E.fail(
        E.QuotaExceeded,
        `expires_at is further ahead than the plan allows (plan ${principal.plan}).`,
        `link_expiry_max_days: ${plan.link_expiry_max_days} (expires_at may be at most ${new Date(ceiling).toISOString()})`
      )
    }

    return withIdempotency(
      operations,
      handlers
        .handle("create", ({ payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            yield* checkDestination(payload.url)
            const base = {
              id: newId("link"),
              accountId: principal.accountId,
              destinationUrl: payload.url,
              status: "active" as const,
              utm: null,
              expiresAt: null
            }
            if (payload.custom_slug !== undefined && isReservedSlug(payload.custom_slug)) {
              return yield* E.fail(
                E.SlugTaken,
                "That slug is reserved.",
                `custom_slug: '${payload.custom_slug}' is reserved`
              )
            }
            const insert = Effect.gen(function* () {
              let row: LinkRow | undefined
              if (payload.custom_slug !== undefined) {
                row = Option.getOrUndefined(yield* links.insert({ ...base, slug: payload.custom_slug }))
                if (row === undefined) {
                  return yield* E.fail(
                    E.SlugTaken,
                    "That slug is already in use.",
                    `custom_slug: '${payload.custom_slug}' is taken`
                  )
                }
              } else {
                // 62^7 slugs: a collision is rare, and each retry draws a fresh random one.
                for (let attempt = 0; attempt < 8 && row === undefined; attempt++) {
                  const slug = newSlug()
                  if (isReservedSlug(slug)) continue
                  row = Option.getOrUndefined(yield* links.insert({ ...base, slug }))
                }
                if (row === undefined) return yield* Effect.dieMessage("could not allocate a free slug")
              }
              yield* outbox.append(Topics.links, row.id, "link.created", row.accountId, eventData(row))
              return row
            })
            // Links per month: the link is counted in the same transaction, or the quota refuses
            // it and the insert is undone (403 quota_exceeded, stored for replay, changes nothing).
            // Unmetered Partner Keys skip the limit but are still counted.
            const period = usagePeriod(new Date())
            const limit = linkQuota(plans.limits(principal.plan), principal.unmetered)
            const created = yield* usage.counted(principal.accountId, period, "links", limit, insert)
            if (Either.isLeft(created)) {
              return yield* E.fail(
                E.QuotaExceeded,
                `The plan's monthly link quota is used up (plan ${principal.plan}, ${period} UTC).`,
                quotaDetail("links_per_month", created.left, limit ?? 0)
              )
            }
            return yield* envelope(toApi(created.right))
          })
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (principal) =>
            keysetPage(
              urlParams,
              (afterSeq: bigint | undefined, limit: number) =>
                links.search(principal.accountId, { ...toFilter(urlParams), afterSeq, limit }),
              toApi
            )
          )
        )
        .handle("export", ({ urlParams }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            const header = `${CSV_COLUMNS.join(",")}\r\n`
            const body = links.streamAll(principal.accountId, toFilter(urlParams)).pipe(
              Stream.map((row) => {
                const l = toApi(row)
                return `${CSV_COLUMNS.map((c) => csvField(String(l[c] ?? ""))).join(",")}\r\n`
              }),
              Stream.prepend(Chunk.of(header)),
              Stream.encodeText,
              Stream.orDie
            )
            return HttpServerResponse.stream(body, {
              contentType: "text/csv; charset=utf-8",
              headers: { "content-disposition": 'attachment; filename="links.csv"', "cache-control": "no-store" }
            })
          })
        )
        .handle("get", ({ path }) => Effect.flatMap(owned(path.id), (row) => envelope(toApi(row))))
        .handle("update", ({ path, payload }) =>
          Effect.gen(function* () {
            yield* changeable(path.id)
            yield* checkDestination(payload.url)
            const row = yield* links.setDestination(path.id, payload.url)
            yield* outbox.append(Topics.links, row.id, "link.updated", row.accountId, eventData(row))
            return yield* envelope(toApi(row))
          })
        )
        .handle("disable", ({ path }) =>
          Effect.gen(function* () {
            const current = yield* owned(path.id, true)
            // Disabling twice is not an error: the link is disabled, as asked.
            if (current.status === "disabled") return yield* envelope(toApi(current))
            const row = yield* links.disable(path.id)
            yield* outbox.append(Topics.links, row.id, "link.disabled", row.accountId, eventData(row))
            return yield* envelope(toApi(row))
          })
        )
        .handle("getOptions", ({ path }) => Effect.flatMap(owned(path.id), (row) => envelope(toOptions(row))))
        .handle("updateOptions", ({ path, payload }) =>
          Effect.gen(function* () {
            yield* changeable(path.id)
            if (typeof payload.expires_at === "string") {
              yield* checkExpiryCeiling(yield* CurrentPrincipal, payload.expires_at)
            }
            const row = yield* links.setOptions(path.id, {
              ...(payload.utm === undefined ? {} : { utm: payload.utm }),
              ...(payload.expires_at === undefined
                ? {}
                : { expiresAt: payload.expires_at === null ? null : new Date(payload.expires_at) })
            })
            yield* outbox.append(Topics.links, row.id, "link.updated", row.accountId, eventData(row))
            return yield* envelope(toOptions(row))
          })
        )
        .handle("qr", ({ path, urlParams }) =>
          Effect.gen(function* () {
            const link = yield* owned(path.id)
            if (urlParams.domain !== undefined) {
              return yield* E.fail(
                E.InvalidRequest,
                "Unknown custom domain.",
                "domain: must be a verified custom domain of the account"
              )
            }
            const text = toApi(link).short_url
            const size = urlParams.size ?? 512
            const errorCorrectionLevel = urlParams.ecc ?? "M"
            // The image is exactly `size` pixels wide. qrcode ignores a width smaller than the
            // symbol plus its quiet zone, so the quiet zone gives way first; and it floors
            // (modules * (width / modules)), which floating point can leave a pixel short, so the
            // PNG asks for half a pixel more (the SVG takes the width as its attribute).
            const modules = QRCode.create(text, { errorCorrectionLevel }).modules.size
            const margin = Math.min(urlParams.margin ?? 4, Math.floor((size - modules) / 2))
            const options = { margin, errorCorrectionLevel } as const
            const headers = {
              "cache-control": "private, max-age=300",
              "content-disposition": `inline; filename="${link.slug}.${urlParams.format ?? "png"}"`
            }
            if (urlParams.format === "svg") {
              const svg = yield* Effect.promise(() => QRCode.toString(text, { ...options, width: size, type: "svg" }))
              return HttpServerResponse.text(svg, { contentType: "image/svg+xml", headers })
            }
            const png = yield* Effect.promise(() =>
              QRCode.toBuffer(text, { ...options, width: size + 0.5, type: "png" })
            )
            return HttpServerResponse.uint8Array(png, { contentType: "image/png", headers })
          })
        )
    )
  })
)
