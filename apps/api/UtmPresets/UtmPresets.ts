import { Effect, Option } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { NameTaken, NotFound } from "../../../domain/Errors.js"
import { UtmPresetRepo } from "../../../domain/ports/UtmPresetRepo.js"
import { isPresetId, type UtmPresetChanges, UtmPresetId, type UtmPresetRow } from "../../../domain/UtmPreset.js"
import { newId } from "../../../infra/Ids.js"

/** What a new preset is made of: a name (already trimmed) and its UTM parameters. */
export interface CreateUtmPresetInput {
  readonly name: string
  readonly utm: UtmPresetRow["utm"]
}

/** A preset name is unique within the account. */
const nameTaken = (name: string) =>
  new NameTaken({ message: "The account already has a UTM preset with this name.", detail: `name: '${name}' is taken` })

const notFound = () => new NotFound({ message: "No such UTM preset." })

/**
 * UTM presets: the use cases the API, the CLI and tests share. Failures are the domain's
 * (domain/Errors.ts); results are the repository's records.
 *
 * No method opens a transaction. A write (create, update, remove) runs in the caller's: the
 * API's IdempotentOperations opens one around every POST, PATCH and DELETE; any other caller
 * wraps the call in `Transactions.withTransaction`.
 */
export class UtmPresets extends Effect.Service<UtmPresets>()("UtmPresets", {
  effect: Effect.gen(function* () {
    const presets = yield* UtmPresetRepo

    /**
     * The caller's preset, or NotFound (another account's is NotFound too). An id of another
     * shape names no preset and must not reach SQL: PostgreSQL refuses NUL bytes.
     */
    const owned = (principal: Principal, id: string, forUpdate = false) =>
      Effect.gen(function* () {
        if (!isPresetId(id)) return yield* notFound()
        const row = yield* forUpdate
          ? presets.findForUpdate(principal.accountId, id)
          : presets.find(principal.accountId, id)
        if (Option.isNone(row)) return yield* notFound()
        return row.value
      })

    const create = Effect.fn("UtmPresets.create")(function* (principal: Principal, input: CreateUtmPresetInput) {
      const row = yield* presets.insert({
        id: UtmPresetId.make(newId("utmp")),
        accountId: principal.accountId,
        name: input.name,
        utm: input.utm
      })
      if (Option.isNone(row)) return yield* nameTaken(input.name)
      return row.value
    })

    /** One keyset page of the caller's presets, newest first. */
    const list = Effect.fn("UtmPresets.list")(
      (principal: Principal, page: { readonly afterSeq?: bigint | undefined; readonly limit: number }) =>
        presets.list(principal.accountId, page)
    )

    const get = Effect.fn("UtmPresets.get")((principal: Principal, id: string) => owned(principal, id))

    /** Renames the preset, replaces its UTM parameters as a whole, or both. */
    const update = Effect.fn("UtmPresets.update")(function* (
      principal: Principal,
      id: string,
      changes: UtmPresetChanges
    ) {
      const current = yield* owned(principal, id, true)
      const row = yield* presets.update(current.id, changes)
      if (Option.isNone(row)) return yield* nameTaken(changes.name ?? current.name)
      return row.value
    })

    /** Deletes the caller's preset; returns it as it was. */
    const remove = Effect.fn("UtmPresets.remove")(function* (principal: Principal, id: string) {
      if (!isPresetId(id)) return yield* notFound()
      const row = yield* presets.remove(principal.accountId, id)
      if (Option.isNone(row)) return yield* notFound()
      return row.value
    })

    return { create, list, get, update, remove } as const
  })
}) {}
