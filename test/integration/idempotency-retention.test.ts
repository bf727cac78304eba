import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { IdempotencyStore } from "../../domain/ports/IdempotencyStore.js"
import { IdempotencyStoreLive } from "../../infra/postgres/Idempotency.js"
import { call, idem, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import type { Envelope, Link } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

let t: TestApi
let a: TestAccount
let db: pg.Client

beforeAll(async () => {
  t = await startTestApi()
  a = await t.newAccount()
  db = new pg.Client({ connectionString: t.databaseUrl })
  await db.connect()
})
afterAll(async () => {
  await db.end()
  await t.close()
})

const age = (key: string, hours: number) =>
  db.query(`UPDATE idempotency_records SET created_at = now() - make_interval(mins => $2) WHERE key = $1`, [
    key,
    Math.round(hours * 60)
  ])

describe("idempotency record retention (24 hours)", () => {
  it("a record just under 24 hours old still replays; once older, the key is free again", async () => {
    const key = idem()
    const first = await call<Envelope<Link>>(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/r1" },
      idempotencyKey: key
    })
    expect(first.status).toBe(201)
    await age(key, 23.9)
    const replay = await call(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/r1" },
      idempotencyKey: key
    })
    expect(replay.headers.get("idempotent-replayed")).toBe("true")
    expect(replay.json).toEqual(first.json)
    const reused = await call(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/r2" },
      idempotencyKey: key
    })
    expect(reused.status).toBe(409)

    await age(key, 24.1)
    const fresh = await call<Envelope<Link>>(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/r2" },
      idempotencyKey: key
    })
    expect(fresh.status).toBe(201)
    expect(fresh.headers.get("idempotent-replayed")).toBeNull()
    expect(fresh.json.data.id).not.toBe(first.json.data.id)
    // The new response now owns the key.
    const again = await call(`${t.api}/links`, {
      method: "POST",
      key: a.key,
      body: { url: "https://example.com/r2" },
      idempotencyKey: key
    })
    expect(again.json).toEqual(fresh.json)
  })

  it("the purge deletes expired records and keeps the others", async () => {
    const oldKey = idem()
    const newKey = idem()
    // Expired before the store starts: its purge at start-up takes it, which shows that purge is over.
    const sentinelKey = idem()
    for (const k of [oldKey, newKey, sentinelKey]) {
      const r = await call(`${t.api}/links`, {
        method: "POST",
        key: a.key,
        body: { url: `https://example.com/${k}` },
        idempotencyKey: k
      })
      expect(r.status).toBe(201)
    }
    await age(sentinelKey, 25)
    const runtime = ManagedRuntime.make(
      IdempotencyStoreLive.pipe(Layer.provide(PgClient.layer({ url: Redacted.make(t.databaseUrl) })))
    )
    try {
      // The store purges once when it starts (in the background); age the record after that
      // purge is over, then purge by hand.
      await runtime.runPromise(IdempotencyStore)
      await waitFor(
        async () => (await db.query("SELECT 1 FROM idempotency_records WHERE key = $1", [sentinelKey])).rowCount === 0,
        { message: "the start-up purge to remove the expired sentinel record" }
      )
      await age(oldKey, 25)
      const purged = await runtime.runPromise(Effect.flatMap(IdempotencyStore, (i) => i.purgeExpired))
      expect(purged).toBe(1)
    } finally {
      await runtime.dispose()
    }
    const left = await db.query("SELECT key FROM idempotency_records WHERE key = ANY($1)", [[oldKey, newKey]])
    expect(left.rows.map((r) => r.key)).toEqual([newKey])
  })
})
