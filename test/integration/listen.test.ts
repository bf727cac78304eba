import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Redacted, Scope } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { listenInBackground } from "../../infra/postgres/Listen.js"
import { createTestDatabase, dropTestDatabase } from "../support/database.js"
import { waitFor } from "../support/waitFor.js"

let databaseUrl: string
let rt: ManagedRuntime.ManagedRuntime<PgClient.PgClient, unknown>
let other: pg.Client

beforeAll(async () => {
  databaseUrl = await createTestDatabase()
  rt = ManagedRuntime.make(
    PgClient.layer({ url: Redacted.make(databaseUrl) }).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Error)))
  )
  other = new pg.Client({ connectionString: databaseUrl })
  await other.connect()
})

afterAll(async () => {
  await other?.end()
  await rt?.dispose()
  if (databaseUrl) await dropTestDatabase(databaseUrl)
})

describe("listenInBackground", () => {
  it("confirms its LISTEN with a probe, and a notification sent right after it returns arrives", async () => {
    const got: Array<string> = []
    const scope = await rt.runPromise(Scope.make())
    try {
      const confirmed = await rt.runPromise(
        Effect.flatMap(PgClient.PgClient, (sql) =>
          listenInBackground(sql, "listen_test", scope, (payload) => got.push(payload))
        )
      )
      // The probe came back: before pg_notify replaced sql.notify (which @effect/sql-pg sends as
      // `NOTIFY channel, $1`, a syntax error), it never did, and every LISTEN waited 2 s for it.
      expect(confirmed).toBe(true)
      await other.query("SELECT pg_notify('listen_test', 'it''s here')")
      await waitFor(() => got.includes("it's here"), { timeoutMs: 15_000, message: "the notification" })
      // The probe is the helper's own: it never reaches the handler.
      expect(got.filter((p) => p.startsWith("probe:"))).toEqual([])
    } finally {
      await rt.runPromise(Scope.close(scope, Exit.void))
    }
  })
})
