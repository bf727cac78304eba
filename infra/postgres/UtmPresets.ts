import type { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option } from "effect"
import { AccountId } from "../../domain/Account.js"
import { UtmPresetRepo } from "../../domain/ports/UtmPresetRepo.js"
import { type UtmPresetChanges, UtmPresetId, type UtmPresetRecord, type UtmPresetRow } from "../../domain/UtmPreset.js"

interface DbUtmPreset {
  seq: string
  id: string
  account_id: string
  name: string
  utm: UtmPresetRow["utm"]
  created_at: Date
  updated_at: Date
}

const toRow = (r: DbUtmPreset): UtmPresetRecord => ({
  seq: BigInt(r.seq),
  id: UtmPresetId.make(r.id),
  accountId: AccountId.make(r.account_id),
  name: r.name,
  utm: r.utm,
  createdAt: r.created_at,
  updatedAt: r.updated_at
})

const first = (rows: ReadonlyArray<DbUtmPreset>) => Option.map(Option.fromNullable(rows[0]), toRow)

/** A unique violation (SQLSTATE 23505) of the given constraint. */
const isUniqueViolation = (error: SqlError, constraint: string) => {
  const cause = error.cause as { code?: unknown; constraint?: unknown } | undefined
  return cause?.code === "23505" && cause.constraint === constraint
}
const NAME_CONSTRAINT = "utm_presets_account_id_name_key"

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  const insert = (preset: Omit<UtmPresetRow, "createdAt" | "updatedAt">) =>
    sql<DbUtmPreset>`
      INSERT INTO utm_presets (id, account_id, name, utm)
      VALUES (${preset.id}, ${preset.accountId}, ${preset.name}, ${sql.json(preset.utm)})
      ON CONFLICT (account_id, name) DO NOTHING
      RETURNING *`.pipe(Effect.map(first), Effect.orDie)

  const find = (accountId: AccountId, id: UtmPresetId) =>
    sql<DbUtmPreset>`SELECT * FROM utm_presets WHERE id = ${id} AND account_id = ${accountId}`.pipe(
      Effect.map(first),
      Effect.orDie
    )

  const findForUpdate = (accountId: AccountId, id: UtmPresetId) =>
    sql<DbUtmPreset>`SELECT * FROM utm_presets WHERE id = ${id} AND account_id = ${accountId} FOR UPDATE`.pipe(
      Effect.map(first),
      Effect.orDie
    )

  /**
   * The statement runs in a savepoint so that a name conflict leaves the surrounding
   * transaction usable (the idempotency record still has to be written).
   */
  const update = (id: string, changes: UtmPresetChanges) => {
    const sets = [sql`updated_at = now()`]
    if (changes.name !== undefined) sets.push(sql`name = ${changes.name}`)
    if (changes.utm !== undefined) sets.push(sql`utm = ${sql.json(changes.utm)}`)
    return sql
      .withTransaction(sql<DbUtmPreset>`UPDATE utm_presets SET ${sql.csv(sets)} WHERE id = ${id} RETURNING *`)
      .pipe(
        Effect.map((rows) => Option.some(toRow(rows[0]!))),
        Effect.catchIf(
          (error) => isUniqueViolation(error, NAME_CONSTRAINT),
          () => Effect.succeed(Option.none<UtmPresetRecord>())
        ),
        Effect.orDie
      )
  }

  const remove = (accountId: AccountId, id: UtmPresetId) =>
    sql<DbUtmPreset>`DELETE FROM utm_presets WHERE id = ${id} AND account_id = ${accountId} RETURNING *`.pipe(
      Effect.map(first),
      Effect.orDie
    )

  const list = (accountId: string, options: { readonly afterSeq?: bigint | undefined; readonly limit: number }) => {
    const conditions = [sql`account_id = ${accountId}`]
    if (options.afterSeq !== undefined) conditions.push(sql`seq < ${options.afterSeq.toString()}`)
    return sql<DbUtmPreset>`
      SELECT * FROM utm_presets WHERE ${sql.and(conditions)}
      ORDER BY seq DESC LIMIT ${options.limit}`.pipe(
      Effect.map((rows) => rows.map(toRow)),
      Effect.orDie
    )
  }

  return UtmPresetRepo.of({ insert, find, findForUpdate, update, remove, list })
})

export const UtmPresetRepoLive: Layer.Layer<UtmPresetRepo, never, PgClient.PgClient> = Layer.effect(UtmPresetRepo, make)
