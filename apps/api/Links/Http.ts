import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Stream } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { type LinkFilter, type Link as LinkModel, shortUrl } from "../../../domain/Link.js"
import type { LinkOptionsChange } from "../../../domain/ports/LinkRepo.js"
import { Api } from "../Api.js"
import { mapDomainErrors } from "../DomainAnswers.js"
import { Domains } from "../Domains/Domains.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { envelope, keysetPage } from "../Shared.js"
import { type ExportLinksParams, toApiLink, toApiLinkOptions, type UpdateLinkOptions } from "./Api.js"
import { linksCsv } from "./Csv.js"
import { Links } from "./Links.js"
import { renderQr } from "./Qr.js"

/** The search filters of GET /links and GET /links.csv, as the repository takes them. */
const toFilter = (params: typeof ExportLinksParams.Type): LinkFilter => ({
  q: params.q,
  status: params.status,
  createdAfter: params.created_after === undefined ? undefined : new Date(params.created_after),
  createdBefore: params.created_before === undefined ? undefined : new Date(params.created_before)
})

/** PATCH /links/{id}/options as the service takes it: a field left out is kept, null clears it. */
const toOptionsChange = (payload: typeof UpdateLinkOptions.Type): LinkOptionsChange => ({
  ...(payload.utm === undefined ? {} : { utm: payload.utm }),
  ...(payload.expires_at === undefined
    ? {}
    : { expiresAt: payload.expires_at === null ? null : new Date(payload.expires_at) })
})

export const LinksHttp = HttpApiBuilder.group(Api, "links", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const links = yield* Links
    const domains = yield* Domains

    /** The caller's link records: the canonical short URL, then one per verified custom domain. */
    const toApiOf = (p: Principal) => Effect.map(domains.linkBases(p), (bases) => toApiLink(links.shortBase, bases))
    const answer = (p: Principal) => (link: LinkModel) => Effect.flatMap(toApiOf(p), (toApi) => envelope(toApi(link)))

    return withIdempotency(
      operations,
      handlers
        .handle("create", ({ payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) =>
              Effect.flatMap(links.create(p, { url: payload.url, customSlug: payload.custom_slug }), answer(p))
            ),
            mapDomainErrors
          )
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (p) =>
            Effect.flatMap(toApiOf(p), (toApi) =>
              keysetPage(
                urlParams,
                (afterSeq: bigint | undefined, limit: number) =>
                  links.list(p, { ...toFilter(urlParams), afterSeq, limit }),
                toApi
              )
            )
          )
        )
        .handle("export", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (p) =>
            Effect.map(toApiOf(p), (toApi) =>
              HttpServerResponse.stream(
                linksCsv(links.exportRows(p, toFilter(urlParams)).pipe(Stream.map(toApi))).pipe(Stream.orDie),
                {
                  contentType: "text/csv; charset=utf-8",
                  headers: { "content-disposition": 'attachment; filename="links.csv"', "cache-control": "no-store" }
                }
              )
            )
          )
        )
        .handle("get", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => Effect.flatMap(links.get(p, path.id), answer(p))),
            mapDomainErrors
          )
        )
        .handle("update", ({ path, payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => Effect.flatMap(links.update(p, path.id, payload.url), answer(p))),
            mapDomainErrors
          )
        )
        .handle("disable", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => Effect.flatMap(links.disable(p, path.id), answer(p))),
            mapDomainErrors
          )
        )
        .handle("getOptions", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.getOptions(p, path.id)),
            Effect.flatMap((link) => envelope(toApiLinkOptions(link))),
            mapDomainErrors
          )
        )
        .handle("updateOptions", ({ path, payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.updateOptions(p, path.id, toOptionsChange(payload))),
            Effect.flatMap((link) => envelope(toApiLinkOptions(link))),
            mapDomainErrors
          )
        )
        .handle("qr", ({ path, urlParams }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) =>
              Effect.flatMap(links.qr(p, path.id), ({ link, url }) =>
                urlParams.domain === undefined
                  ? Effect.succeed({ link, url })
                  : Effect.map(domains.baseOf(p, urlParams.domain), (base) => ({ link, url: shortUrl(base, link) }))
              )
            ),
            Effect.flatMap(({ link, url }) =>
              Effect.map(renderQr(url, urlParams), (image) => {
                const headers = {
                  "cache-control": "private, max-age=300",
                  "content-disposition": `inline; filename="${link.slug}.${image.format}"`
                }
                return image.format === "svg"
                  ? HttpServerResponse.text(image.body, { contentType: image.contentType, headers })
                  : HttpServerResponse.uint8Array(image.body, { contentType: image.contentType, headers })
              })
            ),
            mapDomainErrors
          )
        )
    )
  })
)
