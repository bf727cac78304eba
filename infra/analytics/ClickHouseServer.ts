import { ClickHouseLogLevel, createClient } from "@clickhouse/client"
import { Effect, Layer, Schedule } from "effect"
import { Analytics, AnalyticsError } from "../../domain/Analytics.js"
import { type Engine, makeStore } from "./Store.js"

export interface ServerTarget {
  /** scheme://host:port, without credentials or path */
  readonly origin: string
  readonly username: string
  readonly password: string
  /** The URL's path names the database; default `analytics`. */
  readonly database: string
}

/** `http(s)://[user:password@]host:port[/database]`, as CLICKHOUSE_URL gives it. */
export const parseServerUrl = (raw: string): ServerTarget => {
  const url = new URL(raw)
  const database = decodeURIComponent(url.pathname.replace(/^\/+|\/+$/g, ""))
  return {
    origin: url.origin,
    username: decodeURIComponent(url.username) || "default",
    password: decodeURIComponent(url.password),
    database: database === "" ? "analytics" : database
  }
}

const firstLine = (cause: unknown) => String((cause as Error)?.message ?? cause).split("\n")[0]!

const fail = (what: string) => (cause: unknown) =>
  new AnalyticsError({ message: `ClickHouse: ${what}: ${firstLine(cause)}`, cause })

/**
 * A ClickHouse server over HTTP with @clickhouse/client (checked against 18.16: no query
 * parameters are used, and the client sends no setting that server lacks).
 */
export const acquireServerEngine = (target: ServerTarget) =>
  Effect.gen(function* () {
    const client = yield* Effect.acquireRelease(
      Effect.sync(() =>
        createClient({
          url: target.origin,
          username: target.username,
          password: target.password,
          application: "shortlinks",
          request_timeout: 30_000,
          // Failures reach the caller as AnalyticsError; the client's own log would repeat them.
          log: { level: ClickHouseLogLevel.OFF }
        })
      ),
      (c) => Effect.promise(() => c.close())
    )
    const engine: Engine = {
      kind: "clickhouse",
      exec: (sql) =>
        Effect.tryPromise({ try: () => client.command({ query: sql }), catch: fail("statement failed") }).pipe(
          Effect.asVoid
        ),
      rows: <T>(sql: string) =>
        Effect.tryPromise({
          try: async () => (await client.query({ query: sql, format: "JSONEachRow" })).json<T>(),
          catch: fail("query failed")
        }),
      insert: (table, rows) =>
        Effect.tryPromise({
          try: () => client.insert({ table, values: rows as Array<object>, format: "JSONEachRow" }),
          catch: fail(`insert into ${table} failed`)
        }).pipe(Effect.asVoid)
    }
    // The server may still be starting (docker compose): wait a little before giving up.
    yield* Effect.tryPromise({ try: () => client.ping(), catch: fail("ping failed") }).pipe(
      Effect.flatMap((r) =>
        r.success ? Effect.void : Effect.fail(fail(`${target.origin} is not reachable`)(r.error))
      ),
      Effect.retry(Schedule.exponential("200 millis").pipe(Schedule.upTo("15 seconds")))
    )
    return engine
  })

/** The analytics store on a ClickHouse server; `database` overrides the URL's. */
export const ClickHouseServerAnalyticsLive = (url: string, database?: string) =>
  Layer.scoped(
    Analytics,
    Effect.gen(function* () {
      const target = parseServerUrl(url)
      const engine = yield* acquireServerEngine(target)
      return yield* makeStore(engine, database ?? target.database)
    })
  )
