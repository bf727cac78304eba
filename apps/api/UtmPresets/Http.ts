import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { UtmPresetRepo } from "../../../domain/ports/UtmPresetRepo.js"
import { isPresetId, type UtmPresetRecord } from "../../../domain/UtmPreset.js"
import { newId } from "../../../infra/Ids.js"
import { Api } from "../Api.js"
import * as E from "../Errors.js"
import { CurrentPrincipal } from "../middleware/Authentication.js"
import { IdempotentOperations, withIdempotency } from "../middleware/Idempotency.js"
import { envelope, keysetPage } from "../Shared.js"
import type { UtmPreset } from "./Api.js"

const toApi = (row: UtmPresetRecord): UtmPreset => ({
  id: row.id,
  name: row.name,
  utm: row.utm,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

const nameTaken = (name: string) =>
  E.fail(E.UtmPresetNameTaken, "The account already has a UTM preset with this name.", `name: '${name}' is taken`)

const notFound = () => E.fail(E.NotFound, "No such UTM preset.")

export const UtmPresetsHttp = HttpApiBuilder.group(Api, "utmPresets", (handlers) =>
  Effect.gen(function* () {
    const operations = yield* IdempotentOperations
    const presets = yield* UtmPresetRepo

    return withIdempotency(
      operations,
      handlers
        .handle("create", ({ payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            const row = yield* presets.insert({
              id: newId("utmp"),
              accountId: principal.accountId,
              name: payload.name,
              utm: payload.utm
            })
            if (Option.isNone(row)) return yield* nameTaken(payload.name)
            return yield* envelope(toApi(row.value))
          })
        )
        .handle("list", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (principal) =>
            keysetPage(
              urlParams,
              (afterSeq: bigint | undefined, limit: number) => presets.list(principal.accountId, { afterSeq, limit }),
              toApi
            )
          )
        )
        .handle("get", ({ path }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            if (!isPresetId(path.id)) return yield* notFound()
            const row = yield* presets.find(principal.accountId, path.id)
            if (Option.isNone(row)) return yield* notFound()
            return yield* envelope(toApi(row.value))
          })
        )
        .handle("update", ({ path, payload }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            if (!isPresetId(path.id)) return yield* notFound()
            const current = yield* presets.findForUpdate(principal.accountId, path.id)
            if (Option.isNone(current)) return yield* notFound()
            const row = yield* presets.update(path.id, { name: payload.name, utm: payload.utm })
            if (Option.isNone(row)) return yield* nameTaken(payload.name ?? current.value.name)
            return yield* envelope(toApi(row.value))
          })
        )
        .handle("delete", ({ path }) =>
          Effect.gen(function* () {
            const principal = yield* CurrentPrincipal
            if (!isPresetId(path.id)) return yield* notFound()
            const row = yield* presets.remove(principal.accountId, path.id)
            if (Option.isNone(row)) return yield* notFound()
            return yield* envelope(toApi(row.value))
          })
        )
    )
  })
)
