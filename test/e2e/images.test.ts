import { type ChildProcess, execFile, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { pngBomb } from "../fixtures/images/make.js"
import { freePort } from "../support/ports.js"
import type { Envelope, Image, Usage } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

/**
 * Hosted images end to end, as a client and an operator meet them: `apps/all` on the
 * embedded default (API, conversion worker, classifier, image host, relay), the CLI beside
 * it. Upload, poll, deliver, rate, review, report, usage, delete.
 */
const root = path.resolve(import.meta.dirname, "../..")
const execFileAsync = promisify(execFile)
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-images-e2e-"))
const ports = { api: 0, short: 0, media: 0, snapshot: 0, workers: 0 }
let proc: ChildProcess | undefined
let output = ""

const env = () => ({
  ...process.env,
  DATA_DIR: dataDir,
  API_PORT: String(ports.api),
  SHORT_PORT: String(ports.short),
  MEDIA_PORT: String(ports.media),
  SNAPSHOT_PORT: String(ports.snapshot),
  WORKERS_PORT: String(ports.workers),
  PUBLIC_API_BASE: `http://127.0.0.1:${ports.api}/v1`,
  PUBLIC_SHORT_BASE: `http://127.0.0.1:${ports.short}`,
  PUBLIC_IMAGE_HOST: `http://127.0.0.1:${ports.media}`,
  PUBLIC_SNAPSHOT_HOST: `http://127.0.0.1:${ports.snapshot}`,
  LOG_LEVEL: "Info",
  DATABASE_URL: "",
  KAFKA_BROKERS: "",
  CLICKHOUSE_URL: "",
  S3_BUCKET: ""
})

const api = () => `http://127.0.0.1:${ports.api}/v1`
const media = () => `http://127.0.0.1:${ports.media}`

/** The operator CLI (asynchronously: the test process is not blocked while it runs). */
const cli = async (...args: Array<string>) => {
  const { stdout } = await execFileAsync(process.execPath, ["scripts/cli.mjs", ...args, "--json"], {
    cwd: root,
    env: env()
  })
  return JSON.parse(stdout)
}

/** An item of `cli reviews list --json` (the fields read here). */
interface Review {
  readonly id: string
  readonly image_id: string
}

/** An item of `cli reports list --json` (the fields read here). */
interface Report {
  readonly image_id: string
  readonly reason: string
}

/** Waiting on the service: generous, and a timeout shows the end of its output. */
const serviceWait = (what: string) => ({
  timeoutMs: 200_000,
  intervalMs: 100,
  message: () => `${what}\n${output.slice(-4000)}`
})

beforeAll(async () => {
  ports.api = await freePort()
  ports.short = await freePort()
  ports.media = await freePort()
  ports.snapshot = await freePort()
  ports.workers = await freePort()
  proc = spawn(process.execPath, ["--import", "tsx", "apps/all/main.ts"], { cwd: root, env: env() })
  proc.stdout!.on("data", (c) => (output += c))
  proc.stderr!.on("data", (c) => (output += c))
  // Until both answer ready (not yet while they refuse connections), or the process has exited.
  const state = await waitFor(async () => {
    if (proc!.exitCode !== null) return "exited"
    const [a, m] = await Promise.all([fetch(`http://127.0.0.1:${ports.api}/readyz`), fetch(`${media()}/readyz`)])
    return a.status === 200 && m.status === 200 && "ready"
  }, serviceWait("the service to be ready"))
  if (state === "exited") throw new Error(`service exited: ${output}`)
}, 240_000)

afterAll(async () => {
  if (proc && proc.exitCode === null) {
    proc.kill("SIGTERM")
    await new Promise((r) => proc!.once("exit", r))
  }
  fs.rmSync(dataDir, { recursive: true, force: true })
})

/** One API call; `B` is the body the test expects, declared, not validated (undefined when empty). */
const request = async <B = Envelope<Image>>(
  key: string,
  method: string,
  p: string,
  body?: { readonly type: string; readonly bytes: Uint8Array | string }
) => {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` }
  if (method !== "GET" && method !== "HEAD") headers["idempotency-key"] = randomUUID()
  if (body !== undefined) headers["content-type"] = body.type
  const res = await fetch(`${api()}${p}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: body.bytes })
  })
  const text = await res.text()
  return { status: res.status, headers: res.headers, json: (text === "" ? undefined : JSON.parse(text)) as B }
}

const photo = (width: number, height: number) =>
  sharp({
    create: { width, height, channels: 3, background: { r: 40, g: 120, b: 200 } }
  })
    .composite([
      {
        input: Buffer.from(
          `<svg width="${width}" height="${height}"><circle cx="${width / 2}" cy="${height / 2}" r="${Math.min(width, height) / 3}" fill="#e0a040"/></svg>`
        )
      }
    ])
    .png()
    .toBuffer()

const multipart = (file: Uint8Array, type: string, fields: Record<string, string> = {}) => {
  const boundary = `----e2e${randomUUID()}`
  const parts: Array<Buffer> = []
  for (const [name, value] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`))
  }
  parts.push(
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="upload"\r\nContent-Type: ${type}\r\n\r\n`
    ),
    Buffer.from(file),
    Buffer.from(`\r\n--${boundary}--\r\n`)
  )
  return { type: `multipart/form-data; boundary=${boundary}`, bytes: Buffer.concat(parts) }
}

const ready = (key: string, id: string) =>
  waitFor(
    async () => {
      const r = await request(key, "GET", `/images/${id}`)
      return r.json?.data?.status === "processing" ? undefined : r.json.data
    },
    serviceWait(`image ${id} to leave processing`)
  )

// Generous: the tests start CLI processes and wait on the service, on a possibly busy machine.
describe("hosted images through the running service", { timeout: 120_000 }, () => {
  let key = ""
  let partnerKey = ""
  let accountId = ""

  it("an operator creates an account, an ordinary key and an Unmetered Partner Key", async () => {
    accountId = (await cli("accounts", "create", "--name", "images-e2e")).id
    key = (await cli("keys", "create", "--account", accountId, "--scopes", "images:read,images:write")).key
    partnerKey = (
      await cli("keys", "create", "--account", accountId, "--scopes", "images:read,images:write", "--unmetered")
    ).key
    expect(key).not.toBe(partnerKey)
  })

  let autoImage: Image
  it("a raw PNG upload is accepted (202), converted to WebP, published, and delivered with its rating", async () => {
    const png = await photo(320, 200)
    const created = await request(key, "POST", "/images", { type: "image/png", bytes: png })
    expect(created.status).toBe(202)
    expect(created.json.data.status).toBe("processing")
    expect(created.json.data.content_rating).toBeNull()
    expect(created.json.data.id).toMatch(/^[A-Za-z0-9]{7}$/)
    const done = await ready(key, created.json.data.id)
    expect(done.status).toBe("ready")
    expect(done.mime_type).toBe("image/webp")
    expect(done.url).toBe(`${media()}/${done.id}.webp`)
    expect(done.url).toBe(created.json.data.url)
    expect(done.content_rating).not.toBeNull()
    expect([done.width, done.height]).toEqual([320, 200])
    const got = await fetch(done.url)
    expect(got.status).toBe(200)
    expect(got.headers.get("content-type")).toBe("image/webp")
    expect(got.headers.get("access-control-allow-origin")).toBe("*")
    expect(got.headers.get("access-control-expose-headers")?.toLowerCase()).toContain("x-service-content-rating")
    expect(got.headers.get("cache-control")).toBe("no-store")
    expect(["general", "sensitive", "nsfw", "unrated"]).toContain(got.headers.get("x-service-content-rating"))
    const meta = await sharp(Buffer.from(await got.arrayBuffer())).metadata()
    expect([meta.format, meta.width, meta.height]).toEqual(["webp", 320, 200])
    autoImage = done
  })

  it("the configured classifier rates an `auto` image after publication", async () => {
    const rated = await waitFor(async () => {
      const r = await request(key, "GET", `/images/${autoImage.id}`)
      return r.json.data.rating_source === "classifier" ? r.json.data : undefined
    }, serviceWait("classification"))
    expect(["general", "sensitive", "nsfw"]).toContain(rated.content_rating)
    const head = await fetch(autoImage.url, { method: "HEAD" })
    expect(head.headers.get("x-service-content-rating")).toBe(rated.content_rating)
  })

  it("owner declarations: stricter applies at once, lower waits for an operator, whose approval applies it", async () => {
    const png = await photo(64, 64)
    const created = await request(key, "POST", "/images?content_rating=general", multipart(png, "image/png"))
    expect(created.status).toBe(202)
    const image = await ready(key, created.json.data.id)
    expect(image.content_rating).toBe("general")
    expect(image.rating_source).toBe("owner")

    const stricter = await request(key, "PATCH", `/images/${image.id}/rating`, {
      type: "application/json",
      bytes: JSON.stringify({ content_rating: "nsfw" })
    })
    expect(stricter.status).toBe(200)
    expect(stricter.json.data.content_rating).toBe("nsfw")
    // Evaluated on every request: the very next HEAD shows it.
    expect((await fetch(image.url, { method: "HEAD" })).headers.get("x-service-content-rating")).toBe("nsfw")

    const lower = await request(key, "PATCH", `/images/${image.id}/rating`, {
      type: "application/json",
      bytes: JSON.stringify({ content_rating: "general" })
    })
    expect(lower.status).toBe(202)
    expect(lower.json.data.content_rating).toBe("nsfw")
    expect(lower.json.data.rating_review).toEqual({ requested: "general", status: "pending" })
    expect((await fetch(image.url, { method: "HEAD" })).headers.get("x-service-content-rating")).toBe("nsfw")

    const pending = (await cli("reviews", "list")).reviews as Array<Review>
    const review = pending.find((r) => r.image_id === image.id)
    expect(review).toMatchObject({ requested: "general", current_rating: "nsfw" })
    expect(await cli("reviews", "approve", "--id", review!.id)).toMatchObject({ decision: "approved" })
    await expect(cli("reviews", "approve", "--id", review!.id)).rejects.toThrow()

    const after = await request(key, "GET", `/images/${image.id}`)
    expect(after.json.data.content_rating).toBe("general")
    expect(after.json.data.rating_source).toBe("operator")
    expect(after.json.data.rating_review).toEqual({ requested: "general", status: "approved" })
    expect((await fetch(image.url, { method: "HEAD" })).headers.get("x-service-content-rating")).toBe("general")
  })

  it("a rejected review keeps the effective rating", async () => {
    const created = await request(key, "POST", "/images?content_rating=nsfw", {
      type: "image/png",
      bytes: await photo(32, 32)
    })
    const image = await ready(key, created.json.data.id)
    const lower = await request(key, "PATCH", `/images/${image.id}/rating`, {
      type: "application/json",
      bytes: JSON.stringify({ content_rating: "sensitive" })
    })
    expect(lower.status).toBe(202)
    const review = ((await cli("reviews", "list")).reviews as Array<Review>).find((r) => r.image_id === image.id)
    await cli("reviews", "reject", "--id", review!.id)
    const after = await request(key, "GET", `/images/${image.id}`)
    expect(after.json.data.content_rating).toBe("nsfw")
    expect(after.json.data.rating_review).toEqual({ requested: "sensitive", status: "rejected" })
  })

  it("usage: ordinary keys exclude Partner uploads from `used`; the Partner key sees the total and null limits", async () => {
    const before = (await request<Envelope<Usage>>(key, "GET", "/usage")).json.data.images.storage_bytes
    const created = await request(partnerKey, "POST", "/images", { type: "image/png", bytes: await photo(100, 100) })
    expect(created.status).toBe(202)
    const image = await ready(partnerKey, created.json.data.id)
    const ordinary = (await request<Envelope<Usage>>(key, "GET", "/usage")).json.data.images.storage_bytes
    expect(ordinary.used).toBe(before.used)
    expect(ordinary.unmetered_used).toBe(before.unmetered_used + image.bytes!)
    expect(ordinary.total_used).toBe(ordinary.used + ordinary.unmetered_used)
    expect(ordinary.limit).toEqual(expect.any(Number))
    const partner = (await request<Envelope<Usage>>(partnerKey, "GET", "/usage")).json.data.images.storage_bytes
    expect(partner.used).toBe(ordinary.total_used)
    expect(partner.limit).toBeNull()
  })

  it("the share page shows the rating context and files abuse reports for operators", async () => {
    const page = await fetch(`${media()}/v/${autoImage.id}`)
    expect(page.status).toBe(200)
    const html = await page.text()
    expect(html).toContain(`/${autoImage.id}.webp`)
    const report = await fetch(`${media()}/v/${autoImage.id}/report`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "reason=spam%20and%20abuse",
      redirect: "manual"
    })
    expect(report.status).toBeLessThan(400)
    const reports = (await cli("reports", "list")).reports as Array<Report>
    expect(reports.some((r) => r.image_id === autoImage.id && r.reason === "spam and abuse")).toBe(true)
  })

  it("a decompression bomb is accepted and fails with a reason; the service stays up", async () => {
    // A valid PNG declaring 100000 × 100000 pixels in a few hundred bytes: no admission limit
    // on pixels (contract), so it is accepted and its conversion refuses to decode it.
    const created = await request(key, "POST", "/images", { type: "image/png", bytes: pngBomb() })
    expect(created.status).toBe(202)
    const done = await ready(key, created.json.data.id)
    expect(done.status).toBe("failed")
    expect(done.failure).toMatch(/too large to convert/)
    const delivered = await fetch(done.url)
    expect(delivered.status).toBe(404)
    expect(delivered.headers.get("x-service-content-rating")).toBeNull()
    expect((await fetch(`http://127.0.0.1:${ports.api}/readyz`)).status).toBe(200)
  })

  it("deleting frees the storage at once and stops delivery", async () => {
    const before = (await request<Envelope<Usage>>(key, "GET", "/usage")).json.data.images.storage_bytes.used
    const deleted = await request(key, "DELETE", `/images/${autoImage.id}`)
    expect(deleted.status).toBe(200)
    expect((await request(key, "GET", `/images/${autoImage.id}`)).status).toBe(404)
    const after = (await request<Envelope<Usage>>(key, "GET", "/usage")).json.data.images.storage_bytes.used
    expect(after).toBe(before - autoImage.bytes!)
    const gone = await fetch(autoImage.url)
    expect(gone.status).toBe(404)
    expect(gone.headers.get("x-service-content-rating")).toBeNull()
  })
})
