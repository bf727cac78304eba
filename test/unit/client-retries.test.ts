import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiError, createClient } from "../../clients/typescript/src/index.js"

/**
 * The client package's retries and Idempotency-Keys, against a local server that answers
 * every request with the status it is told to, recording what it received.
 */
let server: Server
let baseUrl: string
let status = 503
let received: Array<{ method: string; url: string; headers: IncomingHttpHeaders }> = []
const codes: Record<number, string> = { 503: "dependency_unavailable", 409: "slug_taken", 404: "not_found" }

beforeAll(async () => {
  server = createServer((request, response) => {
    received.push({ method: request.method ?? "", url: request.url ?? "", headers: request.headers })
    request.resume()
    const body = { error: { code: codes[status], message: "test", request_id: "req_test" } }
    response.writeHead(status, { "content-type": "application/json", "retry-after": "0" })
    response.end(JSON.stringify(body))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))
beforeEach(() => {
  received = []
})

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (e: unknown) => e
  )

describe("clients/typescript: retries only where safe", () => {
  it("retries a GET on 503, then rejects with the typed error", async () => {
    status = 503
    const client = await createClient({ baseUrl, apiKey: "sk_test", retries: 2 })
    const error = await failure(client.links.get({ path: { id: "link_x" } }))
    await client.close()
    expect(error).toBeInstanceOf(ApiError)
    expect(error).toMatchObject({ code: "dependency_unavailable", requestId: "req_test" })
    expect(received.map((r) => `${r.method} ${r.url}`)).toEqual(Array(3).fill("GET /v1/links/link_x"))
    expect(received.every((r) => r.headers.authorization === "Bearer sk_test")).toBe(true)
    expect(received.every((r) => r.headers["idempotency-key"] === undefined)).toBe(true)
  })

  it("retries a write with one generated Idempotency-Key for all attempts, a new one per call", async () => {
    status = 503
    const client = await createClient({ baseUrl, apiKey: "sk_test", retries: 2 })
    await failure(client.links.create({ payload: { url: "https://example.com/" } }))
    await failure(client.links.create({ payload: { url: "https://example.com/" } }))
    await client.close()
    const keys = received.map((r) => r.headers["idempotency-key"])
    expect(keys).toHaveLength(6)
    expect(new Set(keys.slice(0, 3)).size).toBe(1)
    expect(new Set(keys.slice(3)).size).toBe(1)
    expect(keys[0]).not.toBe(keys[3])
    expect(String(keys[0]).length).toBeGreaterThanOrEqual(8)
  })

  it("sends the given Idempotency-Key", async () => {
    status = 503
    const client = await createClient({ baseUrl, apiKey: "sk_test", retries: 1 })
    await failure(client.links.disable({ path: { id: "link_x" } }, { idempotencyKey: "given-key-0001" }))
    await client.close()
    expect(received.map((r) => [r.method, r.headers["idempotency-key"]])).toEqual([
      ["DELETE", "given-key-0001"],
      ["DELETE", "given-key-0001"]
    ])
  })

  it("does not retry an answer that would be the same again (409, 404), nor with retries: 0", async () => {
    const client = await createClient({ baseUrl, apiKey: "sk_test", retries: 3 })
    status = 409
    expect(await failure(client.links.create({ payload: { url: "https://example.com/" } }))).toMatchObject({
      code: "slug_taken"
    })
    status = 404
    expect(await failure(client.links.get({ path: { id: "link_x" } }))).toMatchObject({ code: "not_found" })
    await client.close()
    expect(received).toHaveLength(2)
    const once = await createClient({ baseUrl, apiKey: "sk_test", retries: 0 })
    status = 503
    await failure(once.links.get({ path: { id: "link_x" } }))
    await once.close()
    expect(received).toHaveLength(3)
  })
})
