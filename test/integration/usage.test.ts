import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ImageId } from "../../domain/Image.js"
import { DEFAULT_PLANS } from "../../domain/Plan.js"
import { call, idem, startTestApi, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError } from "../support/http.js"
import type { Envelope, Image, Usage } from "../support/resources.js"

let t: TestApi
let png: Buffer
let bigger: Buffer

beforeAll(async () => {
  png = await sharp({ create: { width: 20, height: 20, channels: 3, background: "#00f" } })
    .png()
    .toBuffer()
  // A PNG with bytes after its end: a different size, still an image.
  bigger = Buffer.concat([png, Buffer.alloc(5000)])
  t = await startTestApi({
    plans: { small: { links_per_month: 7, image_uploads_per_month: 5, storage_bytes: 100_000 } }
  })
})
afterAll(() => t?.close())

const usage = async (key: string) => {
  const r = await call<Envelope<Usage>>(`${t.api}/usage`, { key })
  return expectEnvelope(r, 200)
}

const upload = async (key: string, bytes: Buffer) => {
  const res = await fetch(`${t.api}/images`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "idempotency-key": idem(), "content-type": "image/png" },
    body: bytes
  })
  const json = (await res.json()) as Envelope<Image>
  expect(res.status, JSON.stringify(json)).toBe(202)
  return json.data
}

const createLink = async (key: string) => {
  const r = await call(`${t.api}/links`, { method: "POST", key, body: { url: "https://example.com/u" } })
  expectEnvelope(r, 201)
}

describe("GET /usage", () => {
  it("needs a valid key but no scope", async () => {
    const account = await t.newAccount(["links:read"])
    const noScopes = await t.newKey(account.accountId, [])
    expect((await usage(account.key)).plan).toBe("free")
    expect((await usage(noScopes)).plan).toBe("free")
    expectError(await call(`${t.api}/usage`), 401, "unauthenticated")
    expectError(await call(`${t.api}/usage`, { key: `${account.key}x` }), 401, "unauthenticated")
  })

  it("shows the plan, every figure at 0 and the plan's limits for a new account", async () => {
    const account = await t.newAccount()
    const free = DEFAULT_PLANS.free!
    expect(await usage(account.key)).toEqual({
      plan: "free",
      links: { used: 0, limit: free.links_per_month },
      images: {
        uploads: { used: 0, limit: free.image_uploads_per_month },
        storage_bytes: { used: 0, limit: free.storage_bytes, total_used: 0, unmetered_used: 0 }
      },
      domains: { used: 0, limit: free.custom_domains },
      snapshots: { used: 0, limit: free.snapshots_per_month }
    })
  })

  it("counts this month's links and uploads, and stored bytes with pending uploads, for the account's plan", async () => {
    const account = await t.newAccount(undefined, { plan: "small" })
    await createLink(account.key)
    await createLink(account.key)
    await upload(account.key, png)
    await upload(account.key, bigger)
    expect(await usage(account.key)).toEqual({
      plan: "small",
      links: { used: 2, limit: 7 },
      images: {
        uploads: { used: 2, limit: 5 },
        storage_bytes: {
          used: png.length + bigger.length,
          limit: 100_000,
          total_used: png.length + bigger.length,
          unmetered_used: 0
        }
      },
      domains: { used: 0, limit: DEFAULT_PLANS.free!.custom_domains },
      snapshots: { used: 0, limit: DEFAULT_PLANS.free!.snapshots_per_month }
    })
  })

  it("keeps Partner uploads out of an ordinary key's `used`; the Partner key sees the total and null limits", async () => {
    const account = await t.newAccount(undefined, { plan: "small" })
    const partner = await t.newKey(account.accountId, ["images:write", "links:write"], { unmetered: true })
    await upload(account.key, png)
    await upload(partner, bigger)
    await createLink(partner)
    const ordinary = await usage(account.key)
    expect(ordinary.images.storage_bytes).toEqual({
      used: png.length,
      limit: 100_000,
      total_used: png.length + bigger.length,
      unmetered_used: bigger.length
    })
    expect(ordinary.images.uploads).toEqual({ used: 2, limit: 5 })
    expect(ordinary.links).toEqual({ used: 1, limit: 7 })
    expect(await usage(partner)).toEqual({
      plan: "small",
      links: { used: 1, limit: null },
      images: {
        uploads: { used: 2, limit: null },
        storage_bytes: {
          used: png.length + bigger.length,
          limit: null,
          total_used: png.length + bigger.length,
          unmetered_used: bigger.length
        }
      },
      domains: { used: 0, limit: null },
      snapshots: { used: 0, limit: null }
    })
  })

  it("follows the published size once an image is ready, and frees bytes on delete at once", async () => {
    const account = await t.newAccount()
    const partner = await t.newKey(account.accountId, ["images:write"], { unmetered: true })
    const image = await upload(account.key, bigger)
    const partnerImage = await upload(partner, png)
    await t.withImages(({ jobs }) =>
      jobs.markReady(ImageId.make(image.id), {
        mimeType: "image/webp",
        ext: "webp",
        blobKey: `test/${image.id}`,
        width: 20,
        height: 20,
        frames: 1,
        animated: false,
        bytes: 300
      })
    )
    expect((await usage(account.key)).images.storage_bytes).toMatchObject({
      used: 300,
      total_used: 300 + png.length,
      unmetered_used: png.length
    })
    const del = await call(`${t.api}/images/${partnerImage.id}`, { method: "DELETE", key: account.key })
    expectEnvelope(del, 200)
    expect((await usage(account.key)).images.storage_bytes).toMatchObject({
      used: 300,
      total_used: 300,
      unmetered_used: 0
    })
    // Deleting does not give the month's upload back.
    expect((await usage(account.key)).images.uploads.used).toBe(2)
  })

  it("shows the limits of the account's current plan", async () => {
    const account = await t.newAccount()
    await t.setPlan(account.accountId, "small")
    const u = await usage(account.key)
    expect(u.plan).toBe("small")
    expect(u.links.limit).toBe(7)
    expect(u.images.storage_bytes.limit).toBe(100_000)
  })
})
