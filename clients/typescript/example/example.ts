/**
 * Creates a Short Link, reads it back, shows a typed error, then lists links: once with the
 * Promise facade, once with Effect.
 *   SHORTLINKS_BASE_URL=http://localhost:8080/v1 SHORTLINKS_API_KEY=sk_… npm run example
 */
import { Effect } from "effect"
import { ApiError, ClientLive, createClient, hasCode, makeClient, withIdempotencyKey } from "../src/index.js"

const baseUrl = process.env.SHORTLINKS_BASE_URL ?? "http://localhost:8080/v1"
const apiKey = process.env.SHORTLINKS_API_KEY ?? ""

/** With Promises. */
export const withPromises = async () => {
  const client = await createClient({ baseUrl, apiKey })
  try {
    const created = await client.links.create({ payload: { url: "https://example.com/from-the-client" } })
    console.log("created", created.data.id, created.data.short_url)
    const read = await client.links.get({ path: { id: created.data.id } })
    console.log("read", read.data.destination_url)
    try {
      await client.links.get({ path: { id: "link_doesnotexist" } })
    } catch (e) {
      if (e instanceof ApiError) console.log("error", e.code, e.requestId)
      else throw e
    }
    return created.data.id
  } finally {
    await client.close()
  }
}

/** With Effect: errors are typed by code. */
export const withEffect = Effect.gen(function* () {
  const client = yield* makeClient({ baseUrl, apiKey })
  // A write with a key of your own: sending it again replays the first answer.
  const created = yield* client.links
    .create({ payload: { url: "https://example.com/with-effect" } })
    .pipe(withIdempotencyKey(`example-${Date.now()}`))
  const missing = yield* client.links.get({ path: { id: "link_doesnotexist" } }).pipe(
    Effect.map(() => "found"),
    Effect.catchIf(
      (e) => hasCode(e, "not_found"),
      (e) => Effect.succeed(`not found (${e.error.request_id})`)
    )
  )
  const page = yield* client.links.list({ urlParams: { limit: 5 } })
  return { created: created.data.id, missing, listed: page.data.length }
}).pipe(Effect.provide(ClientLive))

if (import.meta.url === `file://${process.argv[1]}`) {
  await withPromises()
  console.log(await Effect.runPromise(withEffect))
}
