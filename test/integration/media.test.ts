import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import {
  ConfigProvider,
  Context,
  Effect,
  Exit,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  Option,
  Redacted,
  Scope
} from "effect"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Media, MediaLayer } from "../../apps/media/Media.js"
import { AccountId } from "../../domain/Account.js"
import { type DeclaredRating, ImageId } from "../../domain/Image.js"
import { BlobStore } from "../../domain/ports/BlobStore.js"
import { ImageJobRepo } from "../../domain/ports/ImageJobRepo.js"
import { ImageRepo } from "../../domain/ports/ImageRepo.js"
import type { Outbox } from "../../domain/ports/Outbox.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { makeFsBlobStore } from "../../infra/blobstore/FsBlobStore.js"
import { makeTrustedProxies, NO_TRUSTED_PROXIES } from "../../infra/http/TrustedProxies.js"
import { randomBase62 } from "../../infra/Ids.js"
import { DatabaseHealthLive } from "../../infra/postgres/Health.js"
import { ImageReposLive } from "../../infra/postgres/Layers.js"
import { OutboxLive } from "../../infra/postgres/Outbox.js"
import { createTestDatabase, dropTestDatabase } from "../support/database.js"
import { testDatabaseLayer } from "../support/eventlog.js"
import { rawRequest, wire } from "../support/http.js"

const RATING = "x-service-content-rating"

const envLayer = (databaseUrl: string, objects: string) =>
  Layer.mergeAll(ImageReposLive, DatabaseHealthLive, Layer.succeed(BlobStore, makeFsBlobStore(objects))).pipe(
    Layer.provideMerge(OutboxLive),
    Layer.provideMerge(testDatabaseLayer(databaseUrl)),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )

type Env = ManagedRuntime.ManagedRuntime<Layer.Layer.Success<ReturnType<typeof envLayer>>, unknown>

let databaseUrl: string
let objects: string
let env: Env
let accountId: string

beforeAll(async () => {
  databaseUrl = await createTestDatabase()
  objects = fs.mkdtempSync(path.join(os.tmpdir(), "media-objects-"))
  env = ManagedRuntime.make(envLayer(databaseUrl, objects))
  accountId = `acct_${randomBase62(22)}`
  await env.runPromise(
    Effect.flatMap(PgClient.PgClient, (sql) => sql`INSERT INTO accounts (id, name) VALUES (${accountId}, 'media test')`)
  )
})

afterAll(async () => {
  await env?.dispose()
  if (databaseUrl) await dropTestDatabase(databaseUrl)
  if (objects) fs.rmSync(objects, { recursive: true, force: true })
})

const tx = <A, E>(effect: Effect.Effect<A, E, PgClient.PgClient | ImageRepo | ImageJobRepo | Outbox | BlobStore>) =>
  env.runPromise(Effect.flatMap(PgClient.PgClient, (sql) => sql.withTransaction(effect)))

const webp = (color: string) =>
  sharp({ create: { width: 8, height: 6, channels: 3, background: color } })
    .webp()
    .toBuffer()

/** A processing image (inserted, not converted yet). */
const processingImage = async (ext = "webp", mimeType = "image/webp") => {
  const id = randomBase62(7)
  await tx(
    Effect.flatMap(ImageRepo, (images) =>
      images.insert({
        id: ImageId.make(id),
        accountId: AccountId.make(accountId),
        unmetered: false,
        requestedRating: "auto",
        sourceFormat: "png",
        sourceBytes: 100,
        sourceUrl: null,
        mimeType,
        ext
      })
    )
  )
  return id
}

/** A ready WebP image: inserted, its blob stored, then published. */
const readyImage = async (color = "#3366cc") => {
  const id = await processingImage()
  const bytes = await webp(color)
  const blobKey = `images/${id}.webp`
  await tx(
    Effect.gen(function* () {
      yield* Effect.orDie((yield* BlobStore).put(blobKey, bytes, "image/webp"))
      yield* (yield* ImageJobRepo).markReady(ImageId.make(id), {
        mimeType: "image/webp",
        ext: "webp",
        blobKey,
        width: 8,
        height: 6,
        frames: 1,
        animated: false,
        bytes: bytes.byteLength
      })
    })
  )
  return { id, bytes, blobKey }
}

const rate = (id: string, to: DeclaredRating) =>
  tx(
    Effect.gen(function* () {
      const images = yield* ImageRepo
      const row = Option.getOrThrow(yield* images.lockById(id))
      yield* images.rate(row, to, "owner", "owner")
    })
  )

interface Running {
  readonly base: string
  readonly info: Context.Tag.Service<Media>
  readonly close: () => Promise<void>
}

const startMedia = (
  engine: "uws" | "node",
  reportsPerMinute: number,
  trustedProxies = NO_TRUSTED_PROXIES
): Promise<Running> =>
  env.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const config = AppConfig.make({
        databaseUrl: Option.some(Redacted.make(databaseUrl)),
        mediaPort: 0,
        trustedProxies
      })
      const context = yield* Layer.buildWithScope(
        MediaLayer.pipe(Layer.provide(config), Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))),
        scope
      ).pipe(
        Effect.withConfigProvider(
          ConfigProvider.fromMap(
            new Map([
              ["HTTP_ENGINE", engine],
              ["MEDIA_REPORTS_PER_MINUTE", String(reportsPerMinute)]
            ])
          ).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))
        )
      )
      const info = Context.get(context, Media)
      return {
        base: `http://127.0.0.1:${info.port}`,
        info,
        close: () => env.runPromise(Scope.close(scope, Exit.void))
      }
    })
  )

const hit = async (url: string, init: RequestInit = {}) => {
  const res = await fetch(url, { redirect: "manual", ...init })
  const body = Buffer.from(await res.arrayBuffer())
  return { status: res.status, headers: res.headers, body, text: body.toString() }
}

const form = (reason: string) => ({
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams({ reason }).toString()
})

const reportsOf = (id: string) =>
  env.runPromise(
    Effect.flatMap(
      PgClient.PgClient,
      (sql) => sql<Record<string, unknown>>`SELECT * FROM abuse_reports WHERE image_id = ${id} ORDER BY created_at`
    )
  )

describe.each(["uws", "node"] as const)("media host on the %s engine", (engine) => {
  let m: Running
  beforeAll(async () => {
    m = await startMedia(engine, 1000)
  })
  afterAll(async () => {
    await m?.close()
  })

  it("runs on the engine asked for", () => {
    expect(m.info.engine).toBe(engine === "uws" ? "uWebSockets.js" : "node:http")
  })

  it("a ready image answers GET with its bytes, its media type, the rating header, CORS, no-store, nosniff and a strong ETag", async () => {
    const { id, bytes } = await readyImage()
    const r = await hit(`${m.base}/${id}.webp`)
    expect(r.status).toBe(200)
    expect(r.body.equals(bytes)).toBe(true)
    expect(r.headers.get("content-type")).toBe("image/webp")
    expect(r.headers.get("content-length")).toBe(String(bytes.byteLength))
    expect(r.headers.get(RATING)).toBe("unrated")
    expect(r.headers.get("access-control-allow-origin")).toBe("*")
    expect(r.headers.get("access-control-expose-headers")?.toLowerCase()).toContain(RATING)
    expect(r.headers.get("cache-control")).toBe("no-store")
    expect(r.headers.get("x-content-type-options")).toBe("nosniff")
    expect(r.headers.get("etag")).toMatch(/^"[^"]+"$/)
  })

  it("HEAD sends the same headers (Content-Length of the image) and no body bytes", async () => {
    const { id, bytes } = await readyImage()
    const get = await hit(`${m.base}/${id}.webp`)
    const raw = await rawRequest(m.base, wire("HEAD", `/${id}.webp`, {}))
    expect(raw.status).toBe(200)
    expect(raw.body.length).toBe(0)
    expect(raw.headers["content-length"]).toBe(String(bytes.byteLength))
    for (const name of [
      "content-type",
      RATING,
      "access-control-allow-origin",
      "access-control-expose-headers",
      "cache-control",
      "x-content-type-options",
      "etag"
    ]) {
      expect(raw.headers[name], name).toBe(get.headers.get(name))
    }
    // And over a kept-alive connection, HEAD then GET answer in order.
    const head = await hit(`${m.base}/${id}.webp`, { method: "HEAD" })
    expect(head.status).toBe(200)
    expect(head.body.length).toBe(0)
    expect((await hit(`${m.base}/${id}.webp`)).body.equals(bytes)).toBe(true)
  })

  it("a CORS preflight answers 204 with the CORS headers", async () => {
    const { id } = await readyImage()
    const r = await hit(`${m.base}/${id}.webp`, {
      method: "OPTIONS",
      headers: {
        origin: "https://elsewhere.example",
        "access-control-request-method": "GET",
        "access-control-request-headers": "if-none-match"
      }
    })
    expect(r.status).toBe(204)
    expect(r.headers.get("access-control-allow-origin")).toBe("*")
    expect(r.headers.get("access-control-allow-methods")).toContain("GET")
    expect(r.headers.get("access-control-allow-methods")).toContain("HEAD")
    expect(r.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("if-none-match")
    expect(r.headers.get(RATING)).toBeNull()
  })

  it("the rating header follows a rating change on the very next request, with no delay", async () => {
    const { id } = await readyImage()
    expect((await hit(`${m.base}/${id}.webp`, { method: "HEAD" })).headers.get(RATING)).toBe("unrated")
    await rate(id, "nsfw")
    expect((await hit(`${m.base}/${id}.webp`, { method: "HEAD" })).headers.get(RATING)).toBe("nsfw")
    await rate(id, "general")
    expect((await hit(`${m.base}/${id}.webp`)).headers.get(RATING)).toBe("general")
    await rate(id, "sensitive")
    expect((await hit(`${m.base}/${id}.webp`)).headers.get(RATING)).toBe("sensitive")
  })

  it("a processing image answers 202 with a placeholder, Retry-After and no-store, without the rating header", async () => {
    const id = await processingImage()
    for (const method of ["GET", "HEAD"]) {
      const r = await hit(`${m.base}/${id}.webp`, { method })
      expect(r.status).toBe(202)
      expect(r.headers.get(RATING)).toBeNull()
      expect(r.headers.get("retry-after")).toBe("1")
      expect(r.headers.get("cache-control")).toBe("no-store")
      expect(r.headers.get("content-type")).toBe("image/svg+xml")
      expect(r.headers.get("access-control-allow-origin")).toBe("*")
      if (method === "GET") expect(r.text).toContain("<svg")
      else expect(r.body.length).toBe(0)
    }
  })

  it("a deleted image answers 404 without the rating header, also after it was served and cached", async () => {
    const { id } = await readyImage()
    expect((await hit(`${m.base}/${id}.webp`)).status).toBe(200)
    await tx(
      Effect.gen(function* () {
        const images = yield* ImageRepo
        yield* images.softDelete(Option.getOrThrow(yield* images.lockById(id)))
      })
    )
    for (const method of ["GET", "HEAD"]) {
      const r = await hit(`${m.base}/${id}.webp`, { method })
      expect(r.status).toBe(404)
      expect(r.headers.get(RATING)).toBeNull()
      expect(r.headers.get("cache-control")).toBe("no-store")
    }
  })

  it("a failed image, an unknown id and a wrong extension answer 404 without the rating header", async () => {
    const failed = await processingImage()
    await tx(Effect.flatMap(ImageJobRepo, (jobs) => jobs.markFailed(ImageId.make(failed), "not an image")))
    const { id } = await readyImage()
    for (const p of [`/${failed}.webp`, `/${randomBase62(7)}.webp`, `/${id}.png`, `/${id}.WEBP`, `/${id}.jpg`]) {
      const r = await hit(`${m.base}${p}`)
      expect(r.status, p).toBe(404)
      expect(r.headers.get(RATING), p).toBeNull()
    }
  })

  it("a legacy non-WebP record (jpg, longer id) is served with its stored media type", async () => {
    const id = `legacy_${randomBase62(12)}`
    const jpeg = await sharp({ create: { width: 4, height: 4, channels: 3, background: "#cc3300" } })
      .jpeg()
      .toBuffer()
    const blobKey = `legacy/${id}.jpg`
    await env.runPromise(
      Effect.gen(function* () {
        yield* (yield* BlobStore).put(blobKey, jpeg, "image/jpeg")
        const sql = yield* PgClient.PgClient
        yield* sql`
          INSERT INTO images (id, account_id, status, requested_rating, rating, rating_source, source_format,
                              source_bytes, mime_type, ext, blob_key, width, height, frames, animated, bytes)
          VALUES (${id}, ${accountId}, 'ready', 'general', 'general', 'owner', 'jpeg', ${jpeg.byteLength},
                  'image/jpeg', 'jpg', ${blobKey}, 4, 4, 1, false, ${jpeg.byteLength})`
      })
    )
    const r = await hit(`${m.base}/${id}.jpg`)
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toBe("image/jpeg")
    expect(r.headers.get(RATING)).toBe("general")
    expect(r.body.equals(jpeg)).toBe(true)
    expect((await hit(`${m.base}/${id}.webp`)).status).toBe(404)
  })

  it("If-None-Match with the ETag answers 304 with the same headers, the current rating included, and no body", async () => {
    const { id } = await readyImage()
    const first = await hit(`${m.base}/${id}.webp`)
    const etag = first.headers.get("etag")!
    const r = await hit(`${m.base}/${id}.webp`, { headers: { "if-none-match": etag } })
    expect(r.status).toBe(304)
    expect(r.body.length).toBe(0)
    expect(r.headers.get("etag")).toBe(etag)
    expect(r.headers.get(RATING)).toBe("unrated")
    expect(r.headers.get("cache-control")).toBe("no-store")
    expect(r.headers.get("access-control-allow-origin")).toBe("*")
    await rate(id, "nsfw")
    const after = await hit(`${m.base}/${id}.webp`, { headers: { "if-none-match": `"other", ${etag}` } })
    expect(after.status).toBe(304)
    expect(after.headers.get(RATING)).toBe("nsfw")
    expect((await hit(`${m.base}/${id}.webp`, { headers: { "if-none-match": '"other"' } })).status).toBe(200)
  })

  it("image bytes stay cached in memory after the first read (immutable), while the state is read every time", async () => {
    const { id, bytes, blobKey } = await readyImage()
    expect((await hit(`${m.base}/${id}.webp`)).body.equals(bytes)).toBe(true)
    await env.runPromise(Effect.flatMap(BlobStore, (b) => b.remove(blobKey)))
    const r = await hit(`${m.base}/${id}.webp`)
    expect(r.status).toBe(200)
    expect(r.body.equals(bytes)).toBe(true)
  })

  it("the share page shows the image, its rating in words and the report form, with a strict CSP and no cookie", async () => {
    const { id } = await readyImage()
    await rate(id, "nsfw")
    const r = await hit(`${m.base}/v/${id}`)
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toMatch(/^text\/html/)
    expect(r.headers.get("set-cookie")).toBeNull()
    expect(r.headers.get("cache-control")).toBe("no-store")
    const csp = r.headers.get("content-security-policy") ?? ""
    expect(csp).toContain("default-src 'none'")
    expect(csp).not.toContain("script-src")
    expect(r.text).toContain("Rated nsfw: may contain explicit content")
    expect(r.text).toContain(`src="/${id}.webp"`)
    expect(r.text).toMatch(new RegExp(`<form method="post" action="/v/${id}/report"`))
    expect(r.text).toContain('name="reason"')
    expect(r.text).not.toContain("<script")

    const fresh = await readyImage()
    expect((await hit(`${m.base}/v/${fresh.id}`)).text).toContain("Not yet rated: treat with caution")
    const pending = await processingImage()
    expect((await hit(`${m.base}/v/${pending}`)).text).toContain("Processing")
    expect((await hit(`${m.base}/v/${randomBase62(7)}`)).status).toBe(404)
    expect((await hit(`${m.base}/v/${id}`, { method: "HEAD" })).status).toBe(200)
  })

  it("a report stores a row for operators (reason only, no client address) and answers 303 to the thank-you page", async () => {
    const { id } = await readyImage()
    const r = await hit(`${m.base}/v/${id}/report`, form("  Not mine: posted without consent  "))
    expect(r.status).toBe(303)
    expect(r.headers.get("location")).toBe(`/v/${id}?reported=1`)
    const rows = await reportsOf(id)
    expect(rows.length).toBe(1)
    expect(rows[0]!.reason).toBe("Not mine: posted without consent")
    expect(rows[0]!.status).toBe("open")
    expect(JSON.stringify(rows)).not.toContain("127.0.0.1")
    const thanks = await hit(`${m.base}/v/${id}?reported=1`)
    expect(thanks.status).toBe(200)
    expect(thanks.text).toContain("Thank you")
  })

  it("a report with a missing, empty or too long reason is 400, a wrong content type 415, a huge body 413, an unknown or deleted image 404", async () => {
    const { id } = await readyImage()
    const url = `${m.base}/v/${id}/report`
    expect((await hit(url, form(""))).status).toBe(400)
    expect((await hit(url, form("x".repeat(1001)))).status).toBe(400)
    expect((await hit(url, { ...form(""), body: "other=1" })).status).toBe(400)
    expect((await hit(url, { ...form("é".repeat(1000)) })).status).toBe(303)
    expect(
      (await hit(url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"reason":"x"}' }))
        .status
    ).toBe(415)
    const huge = await rawRequest(
      m.base,
      wire(
        "POST",
        `/v/${id}/report`,
        { "Content-Type": "application/x-www-form-urlencoded" },
        `reason=${"a".repeat(20000)}`
      )
    )
    expect(huge.status).toBe(413)
    expect((await hit(`${m.base}/v/${randomBase62(7)}/report`, form("spam"))).status).toBe(404)
    expect((await hit(`${m.base}/v/${id}/report`)).status).toBe(405)
    expect((await reportsOf(id)).length).toBe(1)
  })

  it("health: /healthz is 200, /readyz is 200 while the database answers", async () => {
    expect((await hit(`${m.base}/healthz`)).status).toBe(200)
    const ready = await hit(`${m.base}/readyz`)
    expect(ready.status).toBe(200)
    expect(ready.text).toBe("ready\n")
  })

  it("no request yields a 500: malformed paths, odd methods and bytes answer 4xx without the rating header", async () => {
    const { id } = await readyImage()
    const paths = [
      "/",
      "//",
      "/.webp",
      `/${id}.`,
      `/${id}`,
      `/${id}.webp.webp`,
      `/${id}.webp/`,
      "/%00%00%00%00%00%00%00.webp",
      "/..%2f..%2f..%2fetc%2fpasswd.webp",
      "/../../etc/passwd",
      `/${"a".repeat(70)}.webp`,
      "/v/",
      "/v",
      "/v/%ff%fe%fd%fc%fb%fa%f9",
      `/v/${id}/report/x`,
      `/v/${id}/`,
      "/v/a'b\"c<d>e",
      "/healthz.webp",
      `/${id}.webp?x=%ff`
    ]
    for (const p of paths) {
      for (const method of ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]) {
        const r = await rawRequest(
          m.base,
          wire(
            method,
            p,
            method === "POST" ? { "Content-Type": "application/x-www-form-urlencoded" } : {},
            method === "POST" ? "reason=x" : undefined
          )
        )
        expect([200, 204, 404, 405], `${method} ${p}`).toContain(r.status)
        if (["PUT", "DELETE", "PATCH", "POST"].includes(method)) expect(r.status, `${method} ${p}`).toBe(405)
        if (r.status !== 200 && r.status !== 304) expect(r.headers[RATING], `${method} ${p}`).toBeUndefined()
      }
    }
    const put = await hit(`${m.base}/${id}.webp`, { method: "PUT", body: "x" })
    expect(put.status).toBe(405)
    expect(put.headers.get("allow")).toContain("GET")
    const raw = await rawRequest(m.base, wire("GET", Buffer.from([0x2f, 0xff, 0xfe, 0x2e, 0x77]), {}))
    expect(raw.status).toBeLessThan(500)
  })
})

describe.each(["uws", "node"] as const)("media report rate limit on the %s engine", (engine) => {
  let m: Running
  beforeAll(async () => {
    m = await startMedia(engine, 3)
  })
  afterAll(async () => {
    await m?.close()
  })

  it("a client address gets MEDIA_REPORTS_PER_MINUTE reports a minute, then 429 with Retry-After", async () => {
    const { id } = await readyImage()
    const statuses: Array<number> = []
    let last: Awaited<ReturnType<typeof hit>> | undefined
    for (let i = 0; i < 5; i++) {
      last = await hit(`${m.base}/v/${id}/report`, form(`report ${i}`))
      statuses.push(last.status)
    }
    expect(statuses).toEqual([303, 303, 303, 429, 429])
    const retryAfter = Number(last!.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect((await reportsOf(id)).length).toBe(3)
    // Delivery is not limited by it.
    expect((await hit(`${m.base}/${id}.webp`)).status).toBe(200)
  })
})

describe.each(["uws", "node"] as const)(
  "media report rate limit behind a trusted proxy, on the %s engine",
  (engine) => {
    let m: Running
    beforeAll(async () => {
      // This test connects from 127.0.0.1: the proxy.
      m = await startMedia(engine, 2, makeTrustedProxies(["127.0.0.1", "::1"]))
    })
    afterAll(async () => {
      await m?.close()
    })

    it("each forwarded client address (right-most X-Forwarded-For entry) has its own allowance; spoofed entries to its left change nothing", async () => {
      const { id } = await readyImage()
      const from = (forwardedFor: string, i: number) =>
        hit(`${m.base}/v/${id}/report`, {
          ...form(`report ${i}`),
          headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": forwardedFor }
        }).then((r) => r.status)
      const statuses: Array<number> = []
      for (let i = 0; i < 3; i++) statuses.push(await from(`${i}.${i}.${i}.${i}, 198.51.100.1`, i))
      for (let i = 0; i < 3; i++) statuses.push(await from("198.51.100.2", i))
      expect(statuses).toEqual([303, 303, 429, 303, 303, 429])
    })
  }
)
