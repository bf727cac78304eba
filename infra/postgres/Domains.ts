import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Schema } from "effect"
import type { AccountId } from "../../domain/Account.js"
import {
  Domain,
  type DomainChange,
  type DomainId,
  DomainRecord,
  DomainState,
  type NewDomain
} from "../../domain/Domain.js"
import { DomainRepo, type VerifiedHost } from "../../domain/ports/DomainRepo.js"

/** The columns of the domains table as the driver returns them (timestamptz as Date). */
const columns = {
  id: Schema.String,
  account_id: Schema.String,
  hostname: Schema.String,
  state: DomainState,
  token: Schema.String,
  last_error: Schema.NullOr(Schema.String),
  last_checked_at: Schema.NullOr(Schema.DateFromSelf),
  verified_at: Schema.NullOr(Schema.DateFromSelf),
  proof_missing_since: Schema.NullOr(Schema.DateFromSelf),
  created_at: Schema.DateFromSelf,
  updated_at: Schema.DateFromSelf
}

/** Column names to the model's field names. */
const fieldOfColumn = {
  account_id: "accountId",
  last_error: "lastError",
  last_checked_at: "lastCheckedAt",
  verified_at: "verifiedAt",
  proof_missing_since: "proofMissingSince",
  created_at: "createdAt",
  updated_at: "updatedAt"
} as const

/** A row decodes into the model: renamed to its fields, then checked and built by Domain itself. */
const DomainFromRow = Schema.Struct(columns).pipe(Schema.rename(fieldOfColumn), Schema.compose(Domain))
const DomainRecordFromRow = Schema.Struct({ seq: Schema.BigInt, ...columns }).pipe(
  Schema.rename(fieldOfColumn),
  Schema.compose(DomainRecord)
)

// A row the model refuses is a defect (every write goes through the model): callers orDie.
const decodeDomain = Schema.decodeUnknown(DomainFromRow)
const decodeDomains = Schema.decodeUnknown(Schema.Array(DomainFromRow))
const decodeRecords = Schema.decodeUnknown(Schema.Array(DomainRecordFromRow))
const firstDomain = (rows: ReadonlyArray<unknown>) =>
  rows.length === 0 ? Effect.succeedNone : Effect.asSome(decodeDomain(rows[0]))

/** The advisory lock key of the re-verification sweep (any constant no other lock uses). */
const SWEEP_LOCK = 0x646f6d61696e73n

type VerifiedHostRow = { id: string; account_id: string; hostname: string; updated_at: Date }

const verifiedHostOfRow = (r: VerifiedHostRow): VerifiedHost => ({
  id: r.id as DomainId,
  accountId: r.account_id as AccountId,
  hostname: r.hostname,
  updatedAt: r.updated_at
})

/** Runs the sweep in a transaction holding the sweep's advisory lock; none when another holds it. */
const sweepingAlone = <A, E, R>(sql: PgClient.PgClient, sweep: Effect.Effect<A, E, R>) =>
  sql.withTransaction(
    Effect.gen(function* () {
      const rows = yield* sql<{
        locked: boolean
      }>`SELECT pg_try_advisory_xact_lock(${SWEEP_LOCK.toString()}::bigint) AS locked`
      if (rows[0]?.locked !== true) return Option.none<A>()
      return Option.some(yield* sweep)
    })
  )

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  const insert = (d: NewDomain) =>
    sql`
      INSERT INTO domains (id, account_id, hostname, state, token, last_error, last_checked_at, verified_at, proof_missing_since)
      VALUES (${d.id}, ${d.accountId}, ${d.hostname}, ${d.state}, ${d.token}, ${d.lastError}, ${d.lastCheckedAt},
              ${d.verifiedAt}, ${d.proofMissingSince})
      ON CONFLICT (hostname) WHERE state <> 'disabled' DO NOTHING
      RETURNING *`.pipe(Effect.flatMap(firstDomain), Effect.orDie)

  const find = (accountId: AccountId, id: DomainId) =>
    sql`SELECT * FROM domains WHERE id = ${id} AND account_id = ${accountId}`.pipe(
      Effect.flatMap(firstDomain),
      Effect.orDie
    )

  const findForUpdate = (accountId: AccountId, id: DomainId) =>
    sql`SELECT * FROM domains WHERE id = ${id} AND account_id = ${accountId} FOR UPDATE`.pipe(
      Effect.flatMap(firstDomain),
      Effect.orDie
    )

  // updated_at orders a domain's versions for the redirector's host table (as for links).
  const update = (id: DomainId, c: DomainChange) =>
    sql`
      UPDATE domains SET state = ${c.state}, last_error = ${c.lastError}, last_checked_at = ${c.lastCheckedAt},
        verified_at = ${c.verifiedAt}, proof_missing_since = ${c.proofMissingSince},
        updated_at = greatest(clock_timestamp(), updated_at)
      WHERE id = ${id} RETURNING *`.pipe(
      Effect.flatMap((rows) => decodeDomain(rows[0])),
      Effect.orDie
    )

  const list = (accountId: AccountId, o: { readonly afterSeq?: bigint | undefined; readonly limit: number }) =>
    sql`
      SELECT * FROM domains WHERE account_id = ${accountId}
      ${o.afterSeq === undefined ? sql`` : sql`AND seq < ${o.afterSeq.toString()}`}
      ORDER BY seq DESC LIMIT ${o.limit}`.pipe(Effect.flatMap(decodeRecords), Effect.orDie)

  const countActive = (accountId: AccountId) =>
    sql<{ n: number }>`
      SELECT count(*)::int AS n FROM domains WHERE account_id = ${accountId} AND state <> 'disabled'`.pipe(
      Effect.map((rows) => rows[0]?.n ?? 0),
      Effect.orDie
    )

  const countRegisteredSince = (accountId: AccountId, since: Date) =>
    sql<{ n: number }>`
      SELECT count(*)::int AS n FROM domains WHERE account_id = ${accountId} AND created_at > ${since}`.pipe(
      Effect.map((rows) => rows[0]?.n ?? 0),
      Effect.orDie
    )

  const lockAccount = (accountId: AccountId) =>
    sql`SELECT 1 FROM accounts WHERE id = ${accountId} FOR UPDATE`.pipe(Effect.asVoid, Effect.orDie)

  const verifiedHostnames = (accountId: AccountId) =>
    sql<{ hostname: string }>`
      SELECT hostname FROM domains WHERE account_id = ${accountId} AND state = 'verified'
      ORDER BY verified_at, seq`.pipe(
      Effect.map((rows) => rows.map((r) => r.hostname)),
      Effect.orDie
    )

  const findVerified = (accountId: AccountId, hostname: string) =>
    sql`
      SELECT * FROM domains WHERE account_id = ${accountId} AND hostname = ${hostname} AND state = 'verified'`.pipe(
      Effect.flatMap(firstDomain),
      Effect.orDie
    )

  const allVerified = sql<VerifiedHostRow>`
    SELECT id, account_id, hostname, updated_at FROM domains WHERE state = 'verified'`.pipe(
    Effect.map((rows) => rows.map(verifiedHostOfRow))
  )

  const whileSweeping = <A, E, R>(sweep: Effect.Effect<A, E, R>) => sweepingAlone(sql, sweep)

  const dueForRecheck = (checkedBefore: Date, limit: number) =>
    sql`
      SELECT * FROM domains
      WHERE state = 'verified' AND (last_checked_at IS NULL OR last_checked_at < ${checkedBefore})
      ORDER BY last_checked_at NULLS FIRST, seq LIMIT ${limit} FOR UPDATE SKIP LOCKED`.pipe(
      Effect.flatMap(decodeDomains),
      Effect.orDie
    )

  return DomainRepo.of({
    insert,
    find,
    findForUpdate,
    update,
    list,
    countActive,
    countRegisteredSince,
    lockAccount,
    verifiedHostnames,
    findVerified,
    allVerified,
    whileSweeping,
    dueForRecheck
  })
})

export const DomainRepoLive: Layer.Layer<DomainRepo, never, PgClient.PgClient> = Layer.effect(DomainRepo, make)
