import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import type { AccountId } from "../../domain/Account.js"
import { SnapshotEventData, type SnapshotEventType, Topics } from "../../domain/Events.js"
import { Outbox } from "../../domain/ports/Outbox.js"
import {
  type CaptureResult,
  type NewSnapshot,
  SNAPSHOT_JOBS_CHANNEL,
  SnapshotJobRepo,
  SnapshotRepo
} from "../../domain/ports/SnapshotRepo.js"
import { Manifest, Snapshot, type SnapshotId, SnapshotRecord } from "../../domain/Snapshot.js"
import { snapshotEventData } from "../../domain/SnapshotEventPayload.js"

/** The snapshots table's columns as the driver returns them (int8 as text). */
interface SnapshotRow {
  readonly seq: string
  readonly id: string
  readonly account_id: string
  readonly url: string
  readonly host: string
  readonly capture_status: Snapshot["captureStatus"]
  readonly publication_status: Snapshot["publicationStatus"]
  readonly unmetered: boolean
  readonly final_url: string | null
  readonly http_status: number | null
  readonly title: string | null
  readonly content_type: string | null
  readonly bytes: string | null
  readonly sha256: string | null
  readonly resource_count: number
  readonly resource_bytes: string
  readonly failure: string | null
  readonly created_at: Date
  readonly captured_at: Date | null
}

const COLUMNS = `seq, id, account_id, url, host, capture_status, publication_status, unmetered, final_url,
  http_status, title, content_type, bytes, sha256, resource_count, resource_bytes, failure, created_at, captured_at`

/** A row as the model; the constructor checks it (a row the model refuses is a defect). */
const fields = (r: SnapshotRow) => ({
  id: r.id as SnapshotId,
  accountId: r.account_id as AccountId,
  url: r.url,
  host: r.host,
  captureStatus: r.capture_status,
  publicationStatus: r.publication_status,
  finalUrl: r.final_url,
  httpStatus: r.http_status,
  title: r.title,
  contentType: r.content_type,
  bytes: r.bytes === null ? null : Number(r.bytes),
  sha256: r.sha256,
  resourceCount: r.resource_count,
  resourceBytes: Number(r.resource_bytes),
  failure: r.failure,
  unmetered: r.unmetered,
  createdAt: r.created_at,
  capturedAt: r.captured_at
})
const toSnapshot = (r: SnapshotRow) => new Snapshot(fields(r))
const toRecord = (r: SnapshotRow) => new SnapshotRecord({ ...fields(r), seq: BigInt(r.seq) })
const first = (rows: ReadonlyArray<SnapshotRow>) => Option.map(Option.fromNullable(rows[0]), toSnapshot)

const decodeManifest = Schema.decodeUnknownSync(Manifest)

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const outbox = yield* Outbox
  const columns = sql.unsafe(COLUMNS)

  const emit = (type: SnapshotEventType, s: Snapshot) =>
    outbox.appendEvent(SnapshotEventData, Topics.snapshots, s.id, type, s.accountId, snapshotEventData(s))

  /** Emits each event for the snapshot a statement returned (none: nothing changed). */
  const emitting =
    (...types: ReadonlyArray<SnapshotEventType>) =>
    (rows: ReadonlyArray<SnapshotRow>) =>
      Effect.gen(function* () {
        const s = first(rows)
        if (Option.isSome(s)) for (const type of types) yield* emit(type, s.value)
        return s
      })

  const insert = (n: NewSnapshot) =>
    Effect.gen(function* () {
      const rows = yield* sql<SnapshotRow>`
        INSERT INTO snapshots (id, account_id, url, host, unmetered)
        VALUES (${n.id}, ${n.accountId}, ${n.url}, ${n.host}, ${n.unmetered}) RETURNING ${columns}`
      yield* sql`
        WITH job AS (INSERT INTO snapshot_jobs (snapshot_id) VALUES (${n.id}) RETURNING snapshot_id)
        SELECT pg_notify(${SNAPSHOT_JOBS_CHANNEL}, snapshot_id) FROM job`
      return Option.getOrThrow(yield* emitting("snapshot.requested")(rows))
    }).pipe(Effect.orDie)

  const find = (accountId: AccountId, id: SnapshotId) =>
    sql<SnapshotRow>`SELECT ${columns} FROM snapshots WHERE id = ${id} AND account_id = ${accountId}`.pipe(
      Effect.map(first),
      Effect.orDie
    )

  const byId = (id: SnapshotId) =>
    sql<SnapshotRow>`SELECT ${columns} FROM snapshots WHERE id = ${id}`.pipe(Effect.map(first), Effect.orDie)

  const search = (accountId: AccountId, s: { readonly afterSeq?: bigint | undefined; readonly limit: number }) =>
    sql<SnapshotRow>`
      SELECT ${columns} FROM snapshots
      WHERE account_id = ${accountId} ${s.afterSeq === undefined ? sql`` : sql`AND seq < ${s.afterSeq.toString()}`}
      ORDER BY seq DESC LIMIT ${s.limit}`.pipe(
      Effect.map((rows) => rows.map(toRecord)),
      Effect.orDie
    )

  /**
   * Serialized per account and host until the caller's transaction ends (the request's), so
   * that concurrent requests cannot both pass the limit.
   */
  const inProgressForHost = (accountId: AccountId, host: string) =>
    sql`SELECT pg_advisory_xact_lock(hashtext(${`snapshot-host ${accountId} ${host}`}))`.pipe(
      Effect.zipRight(sql<{ n: number }>`
      SELECT count(*)::int AS n FROM snapshots
      WHERE account_id = ${accountId} AND host = ${host} AND capture_status IN ('queued', 'capturing')`),
      Effect.map((rows) => rows[0]?.n ?? 0),
      Effect.orDie
    )

  const manifest = (id: SnapshotId) =>
    sql<{ manifest: unknown }>`
      SELECT manifest FROM snapshots WHERE id = ${id} AND capture_status = 'captured'`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (r) => decodeManifest(r.manifest))),
      Effect.orDie
    )

  const withdraw = (id: SnapshotId) =>
    Effect.gen(function* () {
      const changed = yield* sql<SnapshotRow>`
        UPDATE snapshots SET publication_status = 'withdrawn', updated_at = clock_timestamp()
        WHERE id = ${id} AND publication_status <> 'withdrawn' RETURNING ${columns}`.pipe(
        Effect.flatMap(emitting("snapshot.withdrawn"))
      )
      return Option.isSome(changed) ? changed : yield* byId(id)
    }).pipe(Effect.orDie)

  return { emitting, repo: SnapshotRepo.of({ insert, find, byId, search, inProgressForHost, manifest, withdraw }) }
})

/** The content-addressed blobs the captures share: known already, and recorded once stored. */
const blobs = (sql: PgClient.PgClient) => ({
  blobKnown: (sha256: string) =>
    sql`SELECT 1 FROM snapshot_blobs WHERE sha256 = ${sha256}`.pipe(
      Effect.map((rows) => rows.length > 0),
      Effect.orDie
    ),
  blobStored: (sha256: string, bytes: number) =>
    sql`INSERT INTO snapshot_blobs (sha256, bytes) VALUES (${sha256}, ${bytes}) ON CONFLICT DO NOTHING`.pipe(
      Effect.asVoid,
      Effect.orDie
    )
})

/** The capture jobs, held by a worker under a lease (`lease_owner` until `lease_until`). */
const makeJobs = (sql: PgClient.PgClient, emitting: Effect.Effect.Success<typeof make>["emitting"]) => {
  const columns = sql.unsafe(COLUMNS.replace(/(\w+)/g, "s.$1"))
  /** The job is still ours: every end of a capture is conditional on it. */
  const held = (id: string, owner: string) =>
    sql`EXISTS (SELECT 1 FROM snapshot_jobs j WHERE j.snapshot_id = ${id} AND j.lease_owner = ${owner})`

  const claim = (id: string, owner: string, leaseMs: number) =>
    Effect.gen(function* () {
      const jobs = yield* sql<{ snapshot_id: string; attempts: number }>`
        UPDATE snapshot_jobs SET lease_owner = ${owner},
          -- A lease that ran out with an owner: that worker died on it (a clean stop gives it back).
          attempts = attempts + CASE WHEN lease_owner IS NULL THEN 0 ELSE 1 END,
          lease_until = clock_timestamp() + ${leaseMs} * interval '1 millisecond'
        WHERE snapshot_id = ${id} AND not_before <= clock_timestamp()
          AND (lease_until IS NULL OR lease_until < clock_timestamp())
        RETURNING snapshot_id, attempts`
      const job = jobs[0]
      if (job === undefined) return Option.none()
      const started = yield* sql<SnapshotRow>`
        UPDATE snapshots s SET capture_status = 'capturing', updated_at = clock_timestamp()
        WHERE s.id = ${id} AND s.capture_status IN ('queued', 'capturing') RETURNING ${columns}`.pipe(
        Effect.flatMap(emitting("snapshot.capture_started"))
      )
      if (Option.isNone(started)) {
        // Ended already (a job left behind): nothing to capture.
        yield* sql`DELETE FROM snapshot_jobs WHERE snapshot_id = ${id}`
        return Option.none()
      }
      return Option.some({ snapshotId: started.value.id, url: started.value.url, attempts: job.attempts })
    }).pipe(Effect.orDie)

  const due = (limit: number) =>
    sql<{ snapshot_id: string }>`
      SELECT snapshot_id FROM snapshot_jobs
      WHERE not_before <= clock_timestamp() AND (lease_until IS NULL OR lease_until < clock_timestamp())
      ORDER BY not_before LIMIT ${limit}`.pipe(
      Effect.map((rows) => rows.map((r) => r.snapshot_id)),
      Effect.orDie
    )

  const renewLease = (id: string, owner: string, leaseMs: number) =>
    sql`
      UPDATE snapshot_jobs SET lease_until = clock_timestamp() + ${leaseMs} * interval '1 millisecond'
      WHERE snapshot_id = ${id} AND lease_owner = ${owner} RETURNING snapshot_id`.pipe(
      Effect.map((rows) => rows.length > 0),
      Effect.orDie
    )

  /** A job no longer worked on waits as `queued` again (no event: the next claim emits capture_started). */
  const requeue = (id: string) =>
    sql`
      UPDATE snapshots SET capture_status = 'queued', updated_at = clock_timestamp()
      WHERE id = ${id} AND capture_status = 'capturing'`

  const release = (id: string, owner: string) =>
    sql`
      UPDATE snapshot_jobs SET lease_owner = NULL, lease_until = NULL
      WHERE snapshot_id = ${id} AND lease_owner = ${owner} RETURNING snapshot_id`.pipe(
      Effect.flatMap((rows) => (rows.length > 0 ? requeue(id) : Effect.void)),
      Effect.asVoid,
      Effect.orDie
    )

  const retryLater = (id: string, owner: string, error: string, delayMs: number) =>
    sql`
      UPDATE snapshot_jobs SET attempts = attempts + 1, last_error = ${error}, lease_owner = NULL, lease_until = NULL,
        not_before = clock_timestamp() + ${delayMs} * interval '1 millisecond'
      WHERE snapshot_id = ${id} AND lease_owner = ${owner} RETURNING snapshot_id`.pipe(
      Effect.flatMap((rows) => (rows.length > 0 ? requeue(id) : Effect.void)),
      Effect.asVoid,
      Effect.orDie
    )

  const markCaptured = (id: string, owner: string, r: CaptureResult) =>
    sql<SnapshotRow>`
      UPDATE snapshots s SET capture_status = 'captured',
        publication_status = CASE WHEN s.publication_status = 'unpublished' THEN 'published' ELSE s.publication_status END,
        final_url = ${r.finalUrl}, http_status = ${r.httpStatus}, title = ${r.title}, content_type = ${r.contentType},
        bytes = ${r.bytes}, sha256 = ${r.sha256}, resource_count = ${r.resourceCount},
        resource_bytes = ${r.resourceBytes}, manifest = ${sql.json(r.manifest)}, failure = NULL,
        captured_at = ${r.manifest.capturedAt}::timestamptz, updated_at = clock_timestamp()
      WHERE s.id = ${id} AND s.capture_status = 'capturing' AND ${held(id, owner)}
      RETURNING ${columns}`.pipe(
      Effect.tap(() => sql`DELETE FROM snapshot_jobs WHERE snapshot_id = ${id} AND lease_owner = ${owner}`),
      Effect.flatMap((rows) =>
        emitting(
          "snapshot.captured",
          ...(rows[0]?.publication_status === "published" ? (["snapshot.published"] as const) : [])
        )(rows)
      ),
      Effect.orDie
    )

  const markFailed = (id: string, owner: string, reason: string) =>
    sql<SnapshotRow>`
      UPDATE snapshots s SET capture_status = 'failed', failure = ${reason}, updated_at = clock_timestamp()
      WHERE s.id = ${id} AND s.capture_status IN ('queued', 'capturing') AND ${held(id, owner)}
      RETURNING ${columns}`.pipe(
      Effect.tap(() => sql`DELETE FROM snapshot_jobs WHERE snapshot_id = ${id} AND lease_owner = ${owner}`),
      Effect.flatMap(emitting("snapshot.failed")),
      Effect.orDie
    )

  return SnapshotJobRepo.of({
    claim,
    due,
    renewLease,
    release,
    retryLater,
    markCaptured,
    markFailed,
    ...blobs(sql)
  })
}

/** SnapshotRepo and SnapshotJobRepo on PostgreSQL; their events go to the Outbox. */
export const SnapshotReposLive: Layer.Layer<SnapshotRepo | SnapshotJobRepo, never, PgClient.PgClient | Outbox> =
  Layer.effectContext(
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      const { emitting, repo } = yield* make
      return Context.make(SnapshotRepo, repo).pipe(Context.add(SnapshotJobRepo, makeJobs(sql, emitting)))
    })
  )
