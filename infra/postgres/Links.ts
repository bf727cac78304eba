import { PgClient } from "@effect/sql-pg"
import { Chunk, Effect, Layer, Option, Schema, Stream } from "effect"
import type { AccountId } from "../../domain/Account.js"
import {
  Link,
  type LinkFilter,
  type LinkId,
  LinkRecord,
  type LinkSearch,
  LinkStatus,
  type NewLink,
  Utm
} from "../../domain/Link.js"
import { type LinkOptionsChange, LinkRepo, type LinkSnapshot } from "../../domain/ports/LinkRepo.js"
import { forEachLinkSnapshot } from "./LinkSnapshots.js"

/** The columns of the links table as the driver returns them (timestamptz as Date, jsonb parsed). */
const columns = {
  id: Schema.String,
  account_id: Schema.String,
  slug: Schema.String,
  destination_url: Schema.String,
  status: LinkStatus,
  utm: Schema.NullOr(Schema.encodedSchema(Utm)),
  expires_at: Schema.NullOr(Schema.DateFromSelf),
  created_at: Schema.DateFromSelf,
  updated_at: Schema.DateFromSelf
}

/** Column names to the model's field names. */
const fieldOfColumn = {
  account_id: "accountId",
  destination_url: "destinationUrl",
  expires_at: "expiresAt",
  created_at: "createdAt",
  updated_at: "updatedAt"
} as const

/** A row decodes into the model: renamed to its fields, then checked and built by Link itself. */
const LinkFromRow = Schema.Struct(columns).pipe(Schema.rename(fieldOfColumn), Schema.compose(Link))

/** The same with the row's keyset position (int8 arrives as a string). */
const LinkRecordFromRow = Schema.Struct({ seq: Schema.BigInt, ...columns }).pipe(
  Schema.rename(fieldOfColumn),
  Schema.compose(LinkRecord)
)

// A row the model refuses is a defect (every write goes through the model): callers orDie.
const decodeLink = Schema.decodeUnknown(LinkFromRow)
const decodeRecords = Schema.decodeUnknown(Schema.Array(LinkRecordFromRow))
/** The first row as the model, if there is one. */
const firstLink = (rows: ReadonlyArray<unknown>) =>
  rows.length === 0 ? Effect.succeedNone : Effect.asSome(decodeLink(rows[0]))

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`)

/** One page of an account's links, newest first, filtered. */
const searchLinks = (sql: PgClient.PgClient, accountId: AccountId, s: LinkSearch) => {
  const conditions = [sql`account_id = ${accountId}`]
  if (s.afterSeq !== undefined) conditions.push(sql`seq < ${s.afterSeq.toString()}`)
  if (s.q !== undefined && s.q !== "") {
    const pattern = `%${escapeLike(s.q)}%`
    conditions.push(sql`(slug ILIKE ${pattern} OR destination_url ILIKE ${pattern})`)
  }
  if (s.status !== undefined) conditions.push(sql`status = ${s.status}`)
  // Compared at the millisecond precision the API shows (created_at is stored in microseconds):
  // created_after=<a link's created_at> must leave that link out.
  if (s.createdAfter !== undefined) conditions.push(sql`date_trunc('milliseconds', created_at) > ${s.createdAfter}`)
  if (s.createdBefore !== undefined) conditions.push(sql`date_trunc('milliseconds', created_at) < ${s.createdBefore}`)
  return sql`
    SELECT * FROM links WHERE ${sql.and(conditions)}
    ORDER BY seq DESC LIMIT ${s.limit}`.pipe(Effect.flatMap(decodeRecords), Effect.orDie)
}

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  const insert = (link: NewLink) =>
    sql`
      INSERT INTO links (id, account_id, slug, destination_url, status, utm, expires_at)
      VALUES (${link.id}, ${link.accountId}, ${link.slug}, ${link.destinationUrl}, ${link.status},
              ${link.utm === null ? null : sql.json(link.utm)}, ${link.expiresAt})
      ON CONFLICT (slug) DO NOTHING
      RETURNING *`.pipe(Effect.flatMap(firstLink), Effect.orDie)

  const find = (accountId: AccountId, id: LinkId) =>
    sql`SELECT * FROM links WHERE id = ${id} AND account_id = ${accountId}`.pipe(
      Effect.flatMap(firstLink),
      Effect.orDie
    )

  const findForUpdate = (accountId: AccountId, id: LinkId) =>
    sql`SELECT * FROM links WHERE id = ${id} AND account_id = ${accountId} FOR UPDATE`.pipe(
      Effect.flatMap(firstLink),
      Effect.orDie
    )

  // updated_at orders a link's versions for the redirector's slug table: the time of the
  // change itself (not the transaction start, which a concurrent change waiting on the row
  // lock would share or precede), and never earlier than the version it replaces.
  const setDestination = (id: LinkId, destinationUrl: string) =>
    sql`
      UPDATE links SET destination_url = ${destinationUrl}, updated_at = greatest(clock_timestamp(), updated_at)
      WHERE id = ${id} RETURNING *`.pipe(
      Effect.flatMap((rows) => decodeLink(rows[0])),
      Effect.orDie
    )

  const setOptions = (id: LinkId, options: LinkOptionsChange) =>
    sql`
      UPDATE links SET
        utm = CASE WHEN ${options.utm !== undefined} THEN ${options.utm == null ? null : sql.json(options.utm)}::jsonb ELSE utm END,
        expires_at = CASE WHEN ${options.expiresAt !== undefined} THEN ${options.expiresAt ?? null}::timestamptz ELSE expires_at END,
        updated_at = greatest(clock_timestamp(), updated_at)
      WHERE id = ${id} RETURNING *`.pipe(
      Effect.flatMap((rows) => decodeLink(rows[0])),
      Effect.orDie
    )

  const disable = (id: LinkId) =>
    sql`
      UPDATE links SET status = 'disabled', updated_at = greatest(clock_timestamp(), updated_at)
      WHERE id = ${id} RETURNING *`.pipe(
      Effect.flatMap((rows) => decodeLink(rows[0])),
      Effect.orDie
    )

  const search = (accountId: AccountId, s: LinkSearch) => searchLinks(sql, accountId, s)

  const streamAll = (accountId: AccountId, filter: LinkFilter = {}, pageSize = 500) =>
    Stream.paginateChunkEffect(undefined as bigint | undefined, (afterSeq) =>
      search(accountId, { ...filter, afterSeq, limit: pageSize }).pipe(
        Effect.map((rows) => {
          const last = rows.at(-1)
          return [Chunk.unsafeFromArray(rows), rows.length === pageSize && last ? Option.some(last.seq) : Option.none()]
        })
      )
    )

  const forEachSnapshot = <E, R>(
    batchSize: number,
    f: (batch: ReadonlyArray<LinkSnapshot>) => Effect.Effect<void, E, R>
  ) => forEachLinkSnapshot(sql, batchSize, f)

  // The planner's way: the rows per page of the last ANALYZE (or VACUUM) times the table's
  // pages now. reltuples is -1 for a table never analyzed (a bulk load just done, say): then
  // its size at ~160 bytes a row (a link with a short URL). Only a hint: 0 if it cannot be read.
  const estimatedCount = sql<{ n: number }>`
    SELECT (CASE
      WHEN c.reltuples < 0 THEN pg_relation_size(c.oid) / 160.0
      WHEN c.relpages = 0 THEN c.reltuples
      ELSE c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8)
    END)::float8 AS n
    FROM pg_class c WHERE c.oid = 'links'::regclass`.pipe(
    Effect.map((rows) => Math.round(rows[0]?.n ?? 0)),
    Effect.orElseSucceed(() => 0)
  )

  return LinkRepo.of({
    insert,
    find,
    findForUpdate,
    setDestination,
    setOptions,
    disable,
    search,
    streamAll,
    forEachSnapshot,
    estimatedCount
  })
})

export const LinkRepoLive: Layer.Layer<LinkRepo, never, PgClient.PgClient> = Layer.effect(LinkRepo, make)
