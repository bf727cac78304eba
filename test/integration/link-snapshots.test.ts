import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type LinkState, SlugTable, stateOfLink } from "../../apps/redirector/SlugTable.js"
import { AccountId } from "../../domain/Account.js"
import { LinkId } from "../../domain/Link.js"
import { LinkRepo, type LinkSnapshot } from "../../domain/ports/LinkRepo.js"
import { LinkRepoLive } from "../../infra/postgres/Links.js"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { testDatabaseLayer } from "../support/eventlog.js"

let api: TestApi
let account: TestAccount
beforeAll(async () => {
  api = await startTestApi()
  account = await api.newAccount()
}, 120_000)
afterAll(async () => {
  await api?.close()
})

const create = async (url: string) => {
  const r = await call<{ data: { id: string } }>(`${api.api}/links`, {
    method: "POST",
    key: account.key,
    body: { url }
  })
  expect(r.status, r.text).toBe(201)
  return r.json.data.id
}
const patch = async (path: string, body: unknown, method = "PATCH") => {
  const r = await call(`${api.api}/links/${path}`, { method, key: account.key, body })
  expect(r.status, r.text).toBe(200)
}

describe("the redirector's load of every link through one binary COPY", () => {
  it("gives each link's redirect state exactly as the model read of the same row, in batches of the size asked", async () => {
    const plain = await create("https://example.com/plain")
    const withUtm = await create("https://example.com/p?x=1")
    const expiresAt = new Date(Date.now() + 30 * 86_400_000 + 678).toISOString()
    await patch(`${withUtm}/options`, { utm: { utm_source: "news" }, expires_at: expiresAt })
    const disabled = await create("https://example.com/gone")
    await patch(disabled, undefined, "DELETE")
    const ids = [plain, withUtm, disabled]
    const program = Effect.gen(function* () {
      const repo = yield* LinkRepo
      const seen: Array<LinkSnapshot> = []
      const sizes: Array<number> = []
      const count = yield* repo.forEachSnapshot(2, (batch) =>
        Effect.sync(() => {
          sizes.push(batch.length)
          seen.push(...batch)
        })
      )
      // The load's size hint: from the table's size before it was ever analyzed (a page of
      // 8 KiB at ~160 bytes a row), the planner's count once it was.
      const unanalyzed = yield* repo.estimatedCount
      const sql = yield* PgClient.PgClient
      yield* sql`ANALYZE links`
      const estimate = yield* repo.estimatedCount
      const models: Array<LinkState> = []
      for (const id of ids) {
        const link = yield* repo.find(AccountId.make(account.accountId), LinkId.make(id))
        models.push(stateOfLink(Option.getOrThrow(link)))
      }
      return { count, sizes, seen, models, estimate, unanalyzed }
    })
    const { count, sizes, seen, models, estimate, unanalyzed } = await Effect.runPromise(
      Effect.provide(program, LinkRepoLive.pipe(Layer.provideMerge(testDatabaseLayer(api.databaseUrl))))
    )
    expect(count).toBe(3)
    expect(estimate).toBe(3)
    expect(unanalyzed).toBe(Math.round(8192 / 160))
    expect(sizes).toEqual([2, 1])
    const byId = new Map(seen.map((s) => [s.id, s]))
    for (const model of models) expect({ ...byId.get(model.id) }).toStrictEqual({ ...model })
    expect(byId.get(withUtm)).toMatchObject({ utm: { utm_source: "news" }, expiresAt: Date.parse(expiresAt) })
    expect(byId.get(disabled)!.active).toBe(false)
    // And the table built from them redirects the active ones only.
    const table = new SlugTable()
    for (const s of seen) table.apply(s)
    expect(table.size).toBe(2)
  }, 120_000)
})

describe("the load when its consumer fails", () => {
  it("fails with the consumer's error while the next batch is in flight, closes the load's connection, and loads again", async () => {
    await create("https://example.com/one")
    await create("https://example.com/two")
    const program = Effect.gen(function* () {
      const repo = yield* LinkRepo
      const sql = yield* PgClient.PgClient
      const loads = sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE query LIKE 'COPY (%FROM links) TO STDOUT (FORMAT binary)' AND pid <> pg_backend_pid()`
      // The probe sees the load while it runs (so a count of 0 afterwards is not a pattern that matches nothing).
      let during = 0
      const failed = yield* repo
        .forEachSnapshot(1, () =>
          Effect.flatMap(loads, ([row]) => {
            during = row!.n
            return Effect.fail("stop" as const)
          })
        )
        .pipe(Effect.flip)
      // The failed load's own connection is gone from the server (its backend exits a moment later).
      const deadline = Date.now() + 30_000
      let left = (yield* loads)[0]!.n
      while (left > 0 && Date.now() < deadline) {
        yield* Effect.sleep("100 millis")
        left = (yield* loads)[0]!.n
      }
      // Again, from the same pool: nothing of the failed load is in the way.
      const count = yield* repo.forEachSnapshot(1, () => Effect.void)
      return { failed, count, left, during }
    })
    const { failed, count, left, during } = await Effect.runPromise(
      Effect.provide(program, LinkRepoLive.pipe(Layer.provideMerge(testDatabaseLayer(api.databaseUrl))))
    )
    expect(failed).toBe("stop")
    expect(during).toBeGreaterThanOrEqual(1)
    expect(left).toBe(0)
    expect(count).toBeGreaterThanOrEqual(2)
  }, 120_000)
})
