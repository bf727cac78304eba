import { PgClient } from "@effect/sql-pg"
import { Chunk, Effect, Layer, Option, Stream } from "effect"
import type { LinkFilter, LinkRecord, LinkRow, LinkSearch, LinkSnapshot, LinkStatus } from "../../domain/Link.js"
import { type LinkOptionsChange, LinkRepo } from "../../domain/ports/LinkRepo.js"

interface DbLink {
  seq: string
  id: string
  account_id: string
  slug: string
  destination_url: string
  status: LinkStatus
  utm: LinkRow["utm"]
  expires_at: Date | null
  created_at: Date
  updated_at: Date
}

const toRow = (r: DbLink): LinkRecord => ({
  seq: BigInt(r.seq),
  id: r.id,
  accountId: r.account_id,
  slug: r.slug,
  destinationUrl: r.destination_url,
  status: r.status,
  utm: r.utm,
  expiresAt: r.expires_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at
})

interface DbSnapshot {
  readonly seq: string
  readonly id: string
  readonly account_id: string
  readonly slug: string
  readonly destination_url: string
  readonly status: string
  readonly utm: Record<string, string> | null
  readonly expires_at: Date | null
  readonly updated_at: Date
}

const toSnapshot = (r: DbSnapshot): LinkSnapshot => ({
  seq: BigInt(r.seq),
  id: r.id,
  accountId: r.account_id,
  slug: r.slug,
  destinationUrl: r.destination_url,
  status: r.status,
  utm: r.utm,
  expiresAt: r.expires_at,
  updatedAt: r.updated_at
})

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`)

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  const insert = (link: Omit<LinkRow, "createdAt" | "updatedAt">) =>
    sql<DbLink>`
      INSERT INTO links (id, account_id, slug, destination_url, status, utm, expires_at)
      VALUES (${link.id}, ${link.accountId}, ${link.slug}, ${link.destinationUrl}, ${link.status},
              ${link.utm === null ? null : sql.json(link.utm)}, ${link.expiresAt})
      ON CONFLICT (slug) DO NOTHING
      RETURNING *`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRow)),
      Effect.orDie
    )

  const find = (accountId: string, id: string) =>
    sql<DbLink>`SELECT * FROM links WHERE id = ${id} AND account_id = ${accountId}`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRow)),
      Effect.orDie
    )

  const findForUpdate = (accountId: string, id: string) =>
    sql<DbLink>`SELECT * FROM links WHERE id = ${id} AND account_id = ${accountId} FOR UPDATE`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRow)),
      Effect.orDie
    )

  // updated_at orders a link's versions for the redirector's slug table: the time of the
  // change itself (not the transaction start, which a concurrent change waiting on the row
  // lock would share or precede), and never earlier than the version it replaces.
  const setDestination = (id: string, destinationUrl: string) =>
    sql<DbLink>`
      UPDATE links SET destination_url = ${destinationUrl}, updated_at = greatest(clock_timestamp(), updated_at)
      WHERE id = ${id} RETURNING *`.pipe(
      Effect.map((rows) => toRow(rows[0]!)),
      Effect.orDie
    )

  const setOptions = (id: string, options: LinkOptionsChange) =>
    sql<DbLink>`
      UPDATE links SET
        utm = CASE WHEN ${options.utm !== undefined} THEN ${options.utm == null ? null : sql.json(options.utm)}::jsonb ELSE utm END,
        expires_at = CASE WHEN ${options.expiresAt !== undefined} THEN ${options.expiresAt ?? null}::timestamptz ELSE expires_at END,
        updated_at = greatest(clock_timestamp(), updated_at)
      WHERE id = ${id} RETURNING *`.pipe(
      Effect.map((rows) => toRow(rows[0]!)),
      Effect.orDie
    )

  const disable = (id: string) =>
    sql<DbLink>`
      UPDATE links SET status = 'disabled', updated_at = greatest(clock_timestamp(), updated_at)
      WHERE id = ${id} RETURNING *`.pipe(
      Effect.map((rows) => toRow(rows[0]!)),
      Effect.orDie
    )

  const search = (accountId: string, s: LinkSearch) => {
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
    return sql<DbLink>`
      SELECT * FROM links WHERE ${sql.and(conditions)}
      ORDER BY seq DESC LIMIT ${s.limit}`.pipe(
      Effect.map((rows) => rows.map(toRow)),
      Effect.orDie
    )
  }

  const streamAll = (accountId: string, filter: LinkFilter = {}, pageSize = 500) =>
    Stream.paginateChunkEffect(undefined as bigint | undefined, (afterSeq) =>
      search(accountId, { ...filter, afterSeq, limit: pageSize }).pipe(
        Effect.map((rows) => {
          const last = rows.at(-1)
          return [Chunk.unsafeFromArray(rows), rows.length === pageSize && last ? Option.some(last.seq) : Option.none()]
        })
      )
    )

  const snapshotsAfter = (afterSeq: bigint, limit: number) =>
    sql<DbSnapshot>`
        SELECT seq, id, account_id, slug, destination_url, status, utm, expires_at, updated_at
        FROM links WHERE seq > ${afterSeq.toString()} ORDER BY seq LIMIT ${limit}`.pipe(
      Effect.map((rows) => rows.map(toSnapshot))
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
    snapshotsAfter
  })
})

export const LinkRepoLive: Layer.Layer<LinkRepo, never, PgClient.PgClient> = Layer.effect(LinkRepo, make)
