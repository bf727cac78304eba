import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Stream } from "effect"
import type { LinkFilter } from "../../../domain/Link.js"
import type { LinkOptionsChange } from "../../../domain/ports/LinkRepo.js"
import { Api } from "../Api.js"
import * as E from "../Errors.js"
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

    const toApi = toApiLink(links.shortBase)

    return withIdempotency(
      operations,
      handlers
        .handle("create", ({ payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.create(p, { url: payload.url, customSlug: payload.custom_slug })),
            Effect.flatMap((link) => envelope(toApi(link))),
            E.mapDomainErrors
          )
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (p) =>
            keysetPage(
              urlParams,
              (afterSeq: bigint | undefined, limit: number) =>
                links.list(p, { ...toFilter(urlParams), afterSeq, limit }),
              toApi
            )
          )
        )
        .handle("export", ({ urlParams }) =>
          Effect.map(CurrentPrincipal, (p) =>
            HttpServerResponse.stream(
              linksCsv(links.exportRows(p, toFilter(urlParams)).pipe(Stream.map(toApi))).pipe(Stream.orDie),
              {
                contentType: "text/csv; charset=utf-8",
                headers: { "content-disposition": 'attachment; filename="links.csv"', "cache-control": "no-store" }
              }
            )
          )
        )
        .handle("get", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.get(p, path.id)),
            Effect.flatMap((link) => envelope(toApi(link))),
            E.mapDomainErrors
          )
        )
        .handle("update", ({ path, payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.update(p, path.id, payload.url)),
            Effect.flatMap((link) => envelope(toApi(link))),
            E.mapDomainErrors
          )
        )
        .handle("disable", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.disable(p, path.id)),
            Effect.flatMap((link) => envelope(toApi(link))),
            E.mapDomainErrors
          )
        )
        .handle("getOptions", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.getOptions(p, path.id)),
            Effect.flatMap((link) => envelope(toApiLinkOptions(link))),
            E.mapDomainErrors
          )
        )
        .handle("updateOptions", ({ path, payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.updateOptions(p, path.id, toOptionsChange(payload))),
            Effect.flatMap((link) => envelope(toApiLinkOptions(link))),
            E.mapDomainErrors
          )
        )
        .handle("qr", ({ path, urlParams }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => links.qr(p, path.id, urlParams.domain)),
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
            E.mapDomainErrors
          )
        )
    )
  })
)
