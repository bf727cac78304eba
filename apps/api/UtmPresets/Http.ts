import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import type { UtmPresetRecord } from "../../../domain/UtmPreset.js"
import { Api } from "../Api.js"
import { mapDomainErrors } from "../DomainAnswers.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { envelope, keysetPage } from "../Shared.js"
import type { UtmPreset } from "./Api.js"
import { UtmPresets } from "./UtmPresets.js"

const toApi = (row: UtmPresetRecord): UtmPreset => ({
  id: row.id,
  name: row.name,
  utm: row.utm,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

export const UtmPresetsHttp = HttpApiBuilder.group(Api, "utmPresets", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const presets = yield* UtmPresets

    return withIdempotency(
      operations,
      handlers
        .handle("create", ({ payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => presets.create(p, { name: payload.name, utm: payload.utm })),
            Effect.flatMap((row) => envelope(toApi(row))),
            mapDomainErrors
          )
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (p) =>
            keysetPage(
              urlParams,
              (afterSeq: bigint | undefined, limit: number) => presets.list(p, { afterSeq, limit }),
              toApi
            )
          )
        )
        .handle("get", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => presets.get(p, path.id)),
            Effect.flatMap((row) => envelope(toApi(row))),
            mapDomainErrors
          )
        )
        .handle("update", ({ path, payload }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => presets.update(p, path.id, { name: payload.name, utm: payload.utm })),
            Effect.flatMap((row) => envelope(toApi(row))),
            mapDomainErrors
          )
        )
        .handle("delete", ({ path }) =>
          CurrentPrincipal.pipe(
            Effect.flatMap((p) => presets.remove(p, path.id)),
            Effect.flatMap((row) => envelope(toApi(row))),
            mapDomainErrors
          )
        )
    )
  })
)
