import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  ApiError,
  ClientLive,
  createClient,
  hasCode,
  makeClient,
  type PromiseClient,
  withIdempotencyKey
} from "../../clients/typescript/src/index.js"
import { startTestApi, type TestAccount, type TestApi } from "../support/api.js"

/** The client package (clients/typescript) against the running service. */
let t: TestApi
let acct: TestAccount
let client: PromiseClient
beforeAll(async () => {
  t = await startTestApi()
  acct = await t.newAccount()
  client = await createClient({ baseUrl: t.api, apiKey: acct.key })
})
afterAll(async () => {
  await client?.close()
  await t?.close()
})

const run = <A, E>(effect: Effect.Effect<A, E, never>) => Effect.runPromise(effect)
const effectClient = (apiKey: string) => makeClient({ baseUrl: t.api, apiKey }).pipe(Effect.provide(ClientLive))

describe("clients/typescript against the service", () => {
  it("creates, reads, changes and disables a link with Promises (keys generated)", async () => {
    const created = await client.links.create({ payload: { url: "https://example.com/client" } })
    expect(created.data.id).toMatch(/^link_/)
    const read = await client.links.get({ path: { id: created.data.id } })
    expect(read.data.destination_url).toBe("https://example.com/client")
    const updated = await client.links.update({
      path: { id: created.data.id },
      payload: { url: "https://example.com/changed" }
    })
    expect(updated.data.destination_url).toBe("https://example.com/changed")
    // Two writes without a key of their own got two different generated keys: both happened.
    const second = await client.links.create({ payload: { url: "https://example.com/client" } })
    expect(second.data.id).not.toBe(created.data.id)
  })

  it("replays a write sent twice with the same key instead of doing it twice", async () => {
    const key = `client-same-${Date.now()}`
    const first = await client.links.create({ payload: { url: "https://example.com/once" } }, { idempotencyKey: key })
    const again = await client.links.create({ payload: { url: "https://example.com/once" } }, { idempotencyKey: key })
    expect(again.data.id).toBe(first.data.id)
    const other = await client.links
      .create({ payload: { url: "https://example.com/other" } }, { idempotencyKey: key })
      .catch((e: unknown) => e)
    expect(other).toBeInstanceOf(ApiError)
    expect((other as ApiError).code).toBe("idempotency_key_reused")
  })

  it("rejects with ApiError by code: not_found, slug_taken, unauthenticated", async () => {
    const missing = await client.links.get({ path: { id: "link_missing" } }).catch((e: unknown) => e)
    expect(missing).toMatchObject({ name: "ApiError", code: "not_found" })
    expect((missing as ApiError).requestId).toMatch(/^req_/)
    await client.links.create({ payload: { url: "https://example.com/a", custom_slug: "client-slug" } })
    const taken = await client.links
      .create({ payload: { url: "https://example.com/b", custom_slug: "client-slug" } })
      .catch((e: unknown) => e)
    expect(taken).toMatchObject({ code: "slug_taken" })
    const stranger = await createClient({ baseUrl: t.api, apiKey: "sk_wrong" })
    const refused = await stranger.usage.get().catch((e: unknown) => e)
    await stranger.close()
    expect(refused).toMatchObject({ code: "unauthenticated" })
  })

  it("runs the package's example against the service (Promises and Effect)", async () => {
    process.env.SHORTLINKS_BASE_URL = t.api
    process.env.SHORTLINKS_API_KEY = acct.key
    const example = await import("../../clients/typescript/example/example.js")
    const id = await example.withPromises()
    expect(id).toMatch(/^link_/)
    const outcome = await Effect.runPromise(example.withEffect)
    expect(outcome.created).toMatch(/^link_/)
    expect(outcome.missing).toMatch(/^not found \(req_/)
    expect(outcome.listed).toBe(5)
  })

  it("fails with typed error bodies in Effect, narrowed by hasCode", async () => {
    const outcome = await run(
      Effect.gen(function* () {
        const c = yield* effectClient(acct.key)
        const created = yield* c.links
          .create({ payload: { url: "https://example.com/effect" } })
          .pipe(withIdempotencyKey(`client-effect-${Date.now()}`))
        const missing = yield* c.links.get({ path: { id: "link_missing" } }).pipe(
          Effect.as("found"),
          Effect.catchIf(
            (e) => hasCode(e, "not_found"),
            (e) => Effect.succeed(e.error.code)
          )
        )
        const usage = yield* c.usage.get()
        return { id: created.data.id, missing, usage }
      })
    )
    expect(outcome.id).toMatch(/^link_/)
    expect(outcome.missing).toBe("not_found")
    expect(outcome.usage.data).toBeDefined()
  })
})
