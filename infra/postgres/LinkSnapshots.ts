import { SqlError } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import pg from "pg"
import { to as copyTo } from "pg-copy-streams"
import type { LinkSnapshot } from "../../domain/ports/LinkRepo.js"

/**
 * Every link's redirect state in one statement, one snapshot of the table: the columns a
 * redirect needs, times as epoch milliseconds, in PostgreSQL's binary COPY format (each field
 * its length and bytes). The redirector's load reads a million rows this way in about half the
 * CPU of a cursor's FETCHes, whose driver makes an object, a buffer slice and a parser call per
 * field (docs/redirect-tier.md).
 */
const SNAPSHOT_COPY = `COPY (
  SELECT id, account_id, slug, destination_url, status = 'active', utm::text,
         floor(extract(epoch FROM expires_at) * 1000)::float8,
         floor(extract(epoch FROM updated_at) * 1000)::float8
  FROM links) TO STDOUT (FORMAT binary)`
const FIELDS = 8
const SIGNATURE = Buffer.from("PGCOPY\n\xff\r\n\0", "latin1")
/** Bytes the COPY stream buffers ahead while the consumer applies a batch (the server keeps sending). */
const READ_AHEAD = 1 << 20

/**
 * A binary COPY stream of SNAPSHOT_COPY's columns to LinkSnapshots, chunk by chunk as the
 * connection hands them over (a row may be split across chunks). Throws on anything that is
 * not that format.
 */
export class SnapshotReader {
  private pending: Buffer | undefined = undefined
  private started = false
  /** The trailer was read: every row is in. */
  private done = false

  /** The rows complete in `chunk` (and what came before it), appended to `out`. */
  push(chunk: Buffer, out: Array<LinkSnapshot>): void {
    const data = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk])
    let p = this.started ? 0 : this.header(data)
    if (p < 0) {
      this.pending = data
      return
    }
    this.started = true
    for (;;) {
      if (this.done) {
        if (p < data.length) throw new Error("binary COPY: data after the trailer")
        break
      }
      const end = this.row(data, p, out)
      if (end < 0) break
      p = end
    }
    this.pending = p < data.length ? data.subarray(p) : undefined
  }

  /** The stream ended: it must have ended with the trailer. */
  finish(): void {
    if (!this.done) throw new Error("binary COPY: the stream ended before its trailer")
  }

  /** Where the rows start, or -1 if the header is not all in yet. */
  private header(data: Buffer): number {
    if (data.length < SIGNATURE.length + 8) return -1
    if (!data.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new Error("binary COPY: no signature")
    const extension = data.readUInt32BE(SIGNATURE.length + 4)
    const start = SIGNATURE.length + 8 + extension
    return data.length < start ? -1 : start
  }

  /** One row (or the trailer) from `p`: where it ends, or -1 if it is not all in yet. */
  private row(data: Buffer, p: number, out: Array<LinkSnapshot>): number {
    if (p + 2 > data.length) return -1
    const fields = data.readInt16BE(p)
    if (fields === -1) {
      this.done = true
      return p + 2
    }
    if (fields !== FIELDS) throw new Error(`binary COPY: a row of ${fields} fields, not ${FIELDS}`)
    // Where each field starts and ends, checked complete before anything is read.
    let at = p + 2
    const starts = this.starts
    const ends = this.ends
    for (let k = 0; k < FIELDS; k++) {
      if (at + 4 > data.length) return -1
      const length = data.readInt32BE(at)
      at += 4
      if (length === -1) {
        starts[k] = -1
        ends[k] = -1
        continue
      }
      if (length < 0) throw new Error("binary COPY: a negative field length")
      if (at + length > data.length) return -1
      starts[k] = at
      ends[k] = at + length
      at += length
    }
    if (starts[4]! < 0 || ends[4]! - starts[4]! !== 1) throw new Error("binary COPY: a bool of another size")
    const updatedAt = this.float(data, 7)
    if (updatedAt === null) throw new Error("binary COPY: no updated_at")
    out.push({
      id: this.text(data, 0),
      accountId: this.text(data, 1),
      slug: this.text(data, 2),
      destinationUrl: this.text(data, 3),
      active: data[starts[4]!] === 1,
      utm: starts[5]! < 0 ? null : (JSON.parse(this.text(data, 5)) as Record<string, string>),
      expiresAt: this.float(data, 6),
      updatedAt
    })
    return at
  }

  /** Field `k` of the row just delimited, as text (never NULL). */
  private text(data: Buffer, k: number): string {
    if (this.starts[k]! < 0) throw new Error("binary COPY: NULL in a column that has none")
    return data.toString("utf8", this.starts[k], this.ends[k])
  }

  /** Field `k` of the row just delimited, a float8 or NULL. */
  private float(data: Buffer, k: number): number | null {
    const from = this.starts[k]!
    if (from < 0) return null
    if (this.ends[k]! - from !== 8) throw new Error("binary COPY: a float8 of another size")
    return data.readDoubleBE(from)
  }

  /** Where each field of the row being read starts (-1: NULL) and ends. */
  private readonly starts = new Int32Array(FIELDS)
  private readonly ends = new Int32Array(FIELDS)
}

const fail = (message: string) => (cause: unknown) => new SqlError.SqlError({ cause, message })

/** A connection of its own for the load, as the client's pool would open one (its config). */
const connect = (config: PgClient.PgClientConfig) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const client = new pg.Client({
          connectionString: config.url === undefined ? undefined : Redacted.value(config.url),
          host: config.host,
          port: config.port,
          database: config.database,
          user: config.username,
          password: config.password === undefined ? undefined : Redacted.value(config.password),
          ssl: config.ssl,
          application_name: config.applicationName
        })
        client.on("error", () => {}) // a lost connection fails the read below
        await client.connect()
        return client
      },
      catch: fail("link snapshots: cannot connect")
    }),
    // Also when the consumer failed mid-stream: the connection goes, the server stops sending.
    (client) => Effect.promise(() => client.end().catch(() => {})).pipe(Effect.timeoutOption(1000))
  )

/**
 * Every link as a LinkSnapshot, `batchSize` at a time, in no particular order (one snapshot of
 * the table, memory flat: the rows of one batch and what the connection reads ahead). `f`
 * gets each batch in turn; the count of links.
 */
export const forEachLinkSnapshot = <E, R>(
  sql: PgClient.PgClient,
  batchSize: number,
  f: (batch: ReadonlyArray<LinkSnapshot>) => Effect.Effect<void, E, R>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const size = Math.max(1, Math.floor(batchSize))
      const client = yield* connect(sql.config)
      const stream = client.query(copyTo(SNAPSHOT_COPY, { highWaterMark: READ_AHEAD }))
      const chunks = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>
      const reader = new SnapshotReader()
      const rows: Array<LinkSnapshot> = []
      let count = 0
      for (;;) {
        const next = yield* Effect.tryPromise({
          try: () => chunks.next(),
          catch: fail("link snapshots: reading failed")
        })
        if (next.done === true) break
        yield* Effect.try({ try: () => reader.push(next.value, rows), catch: fail("link snapshots: unreadable") })
        while (rows.length >= size) {
          count += size
          yield* Effect.yieldNow()
          yield* f(rows.splice(0, size))
        }
      }
      yield* Effect.try({ try: () => reader.finish(), catch: fail("link snapshots: cut short") })
      if (rows.length > 0) {
        count += rows.length
        yield* f(rows)
      }
      return count
    })
  )
