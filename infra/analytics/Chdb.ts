import * as fs from "node:fs"
import * as path from "node:path"
import type { Session } from "chdb"
import { Data, Effect, Layer } from "effect"
import { Analytics, AnalyticsError } from "../../domain/Analytics.js"
import { isAlive } from "../Processes.js"
import type { InputRow } from "./Sql.js"
import { type Engine, makeStore } from "./Store.js"

/** The chDB data directory belongs to another running process (libchdb locks it). */
export class ChdbDirectoryInUse extends Data.TaggedError("ChdbDirectoryInUse")<{
  readonly message: string
  readonly dir: string
  readonly pid: number
}> {}

const firstLine = (cause: unknown) => String((cause as Error)?.message ?? cause).split("\n")[0]!

const fail = (what: string) => (cause: unknown) =>
  new AnalyticsError({ message: `chDB: ${what}: ${firstLine(cause)}`, cause })

/**
 * The process holding `dir`, from the `status` file the engine keeps there (and deletes on
 * close) while it holds the directory's lock. Checked before opening because the engine,
 * refused, only prints its reason to stderr.
 */
const holder = (dir: string): number | undefined => {
  let status: string
  try {
    status = fs.readFileSync(path.join(dir, "status"), "utf8")
  } catch {
    return undefined
  }
  const pid = Number(/^PID:\s*(\d+)/m.exec(status)?.[1])
  return Number.isInteger(pid) && pid !== process.pid && isAlive(pid) ? pid : undefined
}

const TSV_SPECIAL = /[\\\t\n\r]/
const TSV_ESCAPES: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" }

/** A String field of the TabSeparated format. */
export const tsvString = (s: string) => (TSV_SPECIAL.test(s) ? s.replace(/[\\\t\n\r]/g, (c) => TSV_ESCAPES[c]!) : s)

/**
 * Input rows as TabSeparated, in the input table's column order: the engine parses it at a
 * fraction of the cost of JSONEachRow.
 */
export const tabSeparated = (rows: ReadonlyArray<InputRow>): string => {
  let out = ""
  for (const r of rows) {
    out +=
      `${tsvString(r.link_id)}\t${r.dimension}\t${r.period}\t${r.start}\t${tsvString(r.value)}\t${r.bot}\t` +
      `${tsvString(r.visitor)}\t${r.clicks}\t${r.source_partition}\t${r.source_offset}\n`
  }
  return out
}

/** A chDB session on `dir`, closed (and its native work drained) when the scope closes. */
export const acquireChdbEngine = (dir: string) =>
  Effect.gen(function* () {
    const pid = holder(dir)
    if (pid !== undefined) {
      return yield* new ChdbDirectoryInUse({
        message: `the embedded analytics store ${dir} is in use by process ${pid} (the running service?): stop it first, then try again`,
        dir,
        pid
      })
    }
    const chdb = yield* Effect.promise(() => import("chdb"))
    const session: Session = yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          fs.mkdirSync(dir, { recursive: true })
          // Dropped tables go at once, not after 8 minutes: replay drops the old rollup.
          return new chdb.Session(dir, { connectionArgs: ["--database_atomic_delay_before_drop_table_sec=0"] })
        },
        catch: fail(`cannot open ${dir}`)
      }),
      (s) =>
        Effect.promise(async () => {
          s.close()
          await chdb.drainPending()
        })
    )
    const engine: Engine = {
      kind: "chdb",
      exec: (sql) =>
        Effect.tryPromise({ try: () => session.queryAsync(sql), catch: fail("statement failed") }).pipe(Effect.asVoid),
      rows: <T>(sql: string) =>
        Effect.tryPromise({
          try: async () => {
            const text = (await session.queryAsync(sql, { format: "JSONEachRow" })).text()
            return text
              .split("\n")
              .filter((line) => line !== "")
              .map((line) => JSON.parse(line) as T)
          },
          catch: fail("query failed")
        }),
      insert: (table, rows) =>
        Effect.tryPromise({
          try: () => session.insert({ table, values: Buffer.from(tabSeparated(rows)), format: "TabSeparated" }),
          catch: fail(`insert into ${table} failed`)
        }).pipe(Effect.asVoid)
    }
    return engine
  })

/** The analytics store on chDB in `dir`, in `database`. */
export const ChdbAnalyticsLive = (dir: string, database = "analytics") =>
  Layer.scoped(
    Analytics,
    Effect.flatMap(acquireChdbEngine(dir), (engine) => makeStore(engine, database))
  )
