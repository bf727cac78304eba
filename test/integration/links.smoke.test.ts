import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"

let t: TestApi
let acct: TestAccount
beforeAll(async () => {
  t = await startTestApi()
  acct = await t.newAccount()
})
afterAll(() => t.close())

describe("smoke", () => {
  it("creates and reads a link", async () => {
    const created = await call(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "https://example.com/a" }
    })
    expect(created.status, created.text).toBe(201)
    expect(created.json.data.id).toMatch(/^link_/)
    const read = await call(`${t.api}/links/${created.json.data.id}`, { key: acct.key })
    expect(read.status, read.text).toBe(200)
    expect(read.json.data.destination_url).toBe("https://example.com/a")
    const bad = await call(`${t.api}/links`, { method: "POST", key: acct.key, body: { url: "ftp://x", extra: 1 } })
    console.log(bad.text)
    const openapi = await call(`${t.api}/openapi.json`)
    expect(openapi.status).toBe(200)
  })
})
