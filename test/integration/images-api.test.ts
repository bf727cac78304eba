import { randomBytes } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as net from "node:net"
import { Effect, Option } from "effect"
import pg from "pg"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AccountId } from "../../domain/Account.js"
import { ImageId } from "../../domain/Image.js"
import { MAX_IMAGE_BYTES } from "../../domain/ImageFormat.js"
import { animatedGif, jpeg, svg, tiff } from "../fixtures/images/make.js"
import { call, idem, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError, type Reply, rawRequest, wire } from "../support/http.js"
import type { Envelope, ErrorBody, Image, Page, Usage } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

/** The test API's {base_url} and {image_host} (AppConfig defaults). */
const API_BASE = "http://localhost:8080/v1"
const IMAGE_HOST = "http://localhost:8082"

let t: TestApi
let acct: TestAccount
let png: Buffer
let jpg: Buffer
let gif: Buffer

// --- a source server for URL imports, on 127.0.0.1 --------------------------------------------
let source: http.Server
let src: string
let slowInFlight = 0
let slowMax = 0
const sourceHandler = (req: http.IncomingMessage, res: http.ServerResponse) => {
  const path = new URL(req.url!, "http://x").pathname
  switch (path) {
    case "/img.png":
      res.writeHead(200, { "content-type": "image/png", "content-length": png.length })
      return res.end(png)
    case "/mislabelled.jpg":
      // Image bytes under a wrong header: the bytes decide.
      res.writeHead(200, { "content-type": "application/octet-stream" })
      return res.end(jpg)
    case "/page.html":
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" })
      return res.end(`<!doctype html><html><head><meta property="og:image" content="${src}/img.png"></head></html>`)
    case "/post":
      res.writeHead(200, { "content-type": "image/png" })
      return res.end("just some text pretending to be a picture")
    case "/forbidden":
      res.writeHead(403, { "content-type": "text/plain" })
      return res.end("no bots")
    case "/missing":
      res.writeHead(404)
      return res.end()
    case "/huge":
      res.writeHead(200, { "content-type": "image/jpeg", "content-length": MAX_IMAGE_BYTES + 1 })
      return res.end()
    case "/huge-chunked": {
      res.writeHead(200, { "content-type": "image/jpeg" })
      res.write(jpg.subarray(0, 4))
      const chunk = Buffer.alloc(1024 * 1024, 0x61)
      let sent = 0
      const more = () => {
        while (sent < 12 && !res.destroyed) {
          sent++
          if (!res.write(chunk)) return res.once("drain", more)
        }
        res.end()
      }
      return more()
    }
    case "/to-private":
      res.writeHead(302, { location: "http://10.0.0.1/img.png" })
      return res.end()
    case "/to-metadata":
      res.writeHead(301, { location: "http://[::ffff:169.254.169.254]/latest/meta-data" })
      return res.end()
    case "/to-img":
      res.writeHead(302, { location: "/img.png" })
      return res.end()
    case "/slow.png": {
      // A slow source on purpose: the image after 1.5 s; counts the fetches it serves at once.
      slowMax = Math.max(slowMax, ++slowInFlight)
      res.on("close", () => slowInFlight--)
      const timer = setTimeout(() => {
        res.writeHead(200, { "content-type": "image/png", "content-length": png.length })
        res.end(png)
      }, 1_500)
      res.on("close", () => clearTimeout(timer))
      return
    }
    default:
      res.writeHead(404)
      res.end()
  }
}

beforeAll(async () => {
  ;[png, jpg, gif] = await Promise.all([
    sharp({ create: { width: 40, height: 30, channels: 3, background: "#0a0" } })
      .png()
      .toBuffer(),
    jpeg(48, 32),
    animatedGif(3)
  ])
  source = http.createServer(sourceHandler)
  await new Promise<void>((resolve) => source.listen(0, "127.0.0.1", resolve))
  src = `http://127.0.0.1:${(source.address() as AddressInfo).port}`
  t = await startTestApi({
    plans: { tinystore: { storage_bytes: 3000 }, fewuploads: { image_uploads_per_month: 2 } }
  })
  acct = await t.newAccount()
})
afterAll(async () => {
  await t?.close()
  await new Promise((resolve) => source?.close(resolve))
})

// --- helpers -------------------------------------------------------------------------------------

/** No request of this suite may be answered with a 5xx. */
const noServerError = <R extends { readonly status: number; readonly text: string }>(r: R): R => {
  expect(r.status, r.text).toBeLessThan(500)
  return r
}

/** The reply to a fetch; `B` is the body the test expects, as with `call`. */
const parse = async <B = Envelope<Image>>(res: Response): Promise<Reply<B>> => {
  const text = await res.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return noServerError<Reply<B>>({ status: res.status, headers: res.headers, text, json: json as B })
}

interface Send {
  readonly key?: string
  readonly query?: string
  readonly idempotencyKey?: string
}

/** POST /images with raw bytes. */
const uploadRaw = async <B = Envelope<Image>>(bytes: Uint8Array, contentType: string, o: Send = {}) =>
  parse<B>(
    await fetch(`${t.api}/images${o.query ?? ""}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${o.key ?? acct.key}`,
        "idempotency-key": o.idempotencyKey ?? idem(),
        "content-type": contentType
      },
      body: bytes
    })
  )

interface Part {
  readonly name: string
  readonly value: Uint8Array | string
  readonly filename?: string
  readonly contentType?: string
}

const multipartBody = (parts: ReadonlyArray<Part>, boundary: string) => {
  const chunks: Array<Buffer> = []
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename === undefined ? "" : `; filename="${p.filename}"`}`
    const type = p.contentType === undefined ? "" : `Content-Type: ${p.contentType}\r\n`
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${type}\r\n`))
    chunks.push(Buffer.from(p.value))
    chunks.push(Buffer.from("\r\n"))
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return Buffer.concat(chunks)
}

/** POST /images as multipart/form-data with a boundary of our own. */
const uploadMultipart = async <B = Envelope<Image>>(
  parts: ReadonlyArray<Part>,
  o: Send & { readonly boundary?: string } = {}
) => {
  const boundary = o.boundary ?? `----test${randomBytes(8).toString("hex")}`
  return uploadRaw<B>(multipartBody(parts, boundary), `multipart/form-data; boundary=${boundary}`, o)
}

const filePart = (bytes: Uint8Array, contentType = "image/png"): Part => ({
  name: "file",
  value: bytes,
  filename: "picture.png",
  contentType
})

const importUrl = async <B = Envelope<Image>>(
  url: string,
  o: Send & { readonly api?: TestApi; readonly body?: unknown } = {}
) =>
  noServerError(
    await call<B>(`${(o.api ?? t).api}/images/url`, {
      method: "POST",
      key: o.key ?? acct.key,
      body: o.body ?? { url },
      ...(o.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey })
    })
  )

const get = async <B = Envelope<Image>>(path: string, key = acct.key) =>
  noServerError(await call<B>(`${t.api}${path}`, { key }))

const listAll = async (key: string, limit = 100) => {
  const out: Array<Image> = []
  let cursor: string | null = null
  for (let page = 0; page < 100; page++) {
    const r: Reply<Page<Image>> = await get(`/images?limit=${limit}${cursor === null ? "" : `&cursor=${cursor}`}`, key)
    expectEnvelope(r, 200)
    out.push(...r.json.data)
    cursor = r.json.meta.next_cursor
    if (cursor === null) return out
  }
  throw new Error("paging did not end")
}

const markReady = (id: string, bytes = 1234) =>
  t.withImages(({ jobs }) =>
    jobs.markReady(ImageId.make(id), {
      mimeType: "image/webp",
      ext: "webp",
      blobKey: `test/${id}`,
      width: 40,
      height: 30,
      frames: 1,
      animated: false,
      bytes
    })
  )

const expectProcessingRecord = (image: Image) => {
  expect(image.id).toMatch(/^[0-9A-Za-z]{7}$/)
  expect(image.status).toBe("processing")
  expect(image.status_url).toBe(`${API_BASE}/images/${image.id}`)
  expect(image.url).toBe(`${IMAGE_HOST}/${image.id}.webp`)
  expect(image.share_url).toBe(`${IMAGE_HOST}/v/${image.id}`)
  expect(image.mime_type).toBe("image/webp")
  expect(image.content_rating).toBeNull()
  expect(image.rating_source).toBeNull()
  expect(image.rating_review).toBeNull()
  expect(image.width).toBeNull()
  expect(image.height).toBeNull()
  expect(image.bytes).toBeNull()
  expect(image.animated).toBeNull()
  expect(image.failure).toBeNull()
  expect(Math.abs(Date.parse(image.created_at) - Date.now())).toBeLessThan(60_000)
}

// --- upload --------------------------------------------------------------------------------------

describe("POST /images: accepted uploads", () => {
  it("takes raw PNG bytes and answers 202 with a processing image record (7-character id, URLs, null rating)", async () => {
    const r = await uploadRaw(png, "image/png")
    const image = expectEnvelope(r, 202)
    expectProcessingRecord(image)
    // status_url is {base_url}/images/{id}: the same record there.
    const polled = expectEnvelope(await get(image.status_url.slice(API_BASE.length)), 200)
    expect(polled).toEqual(image)
  })

  it("takes multipart/form-data with a file part (JPEG) and a content_rating field", async () => {
    const r = await uploadMultipart([filePart(jpg, "image/jpeg"), { name: "content_rating", value: "nsfw" }])
    const image = expectEnvelope(r, 202)
    expectProcessingRecord(image)
    const stored = await t.withImages(({ images }) => images.byId(image.id))
    expect(Option.getOrThrow(stored).requestedRating).toBe("nsfw")
  })

  it("takes content_rating as a query parameter for raw and multipart bodies", async () => {
    const raw = expectEnvelope(await uploadRaw(png, "image/png", { query: "?content_rating=general" }), 202)
    const multi = expectEnvelope(await uploadMultipart([filePart(png)], { query: "?content_rating=nsfw" }), 202)
    const rows = await t.withImages(({ images }) => images.byId(raw.id))
    expect(Option.getOrThrow(rows).requestedRating).toBe("general")
    expect(Option.getOrThrow(await t.withImages(({ images }) => images.byId(multi.id))).requestedRating).toBe("nsfw")
  })

  it("judges by the bytes, not the declared type: JPEG bytes sent as image/png are accepted", async () => {
    expectEnvelope(await uploadRaw(jpg, "image/png"), 202)
  })

  it("accepts an animated GIF and a WebP; a small animation is published as WebP", async () => {
    const a = expectEnvelope(await uploadRaw(gif, "image/gif"), 202)
    expect(a.mime_type).toBe("image/webp")
    expect(a.url).toMatch(/\.webp$/)
    const webp = await sharp(png).webp().toBuffer()
    expectEnvelope(await uploadMultipart([filePart(webp, "image/webp")]), 202)
  })
})

describe("POST /images: idempotency", () => {
  it("replays a multipart retry with a new boundary and the same Idempotency-Key; other content is 409", async () => {
    const key = idem()
    const first = expectEnvelope(
      await uploadMultipart([filePart(png)], { idempotencyKey: key, boundary: "b-one" }),
      202
    )
    const retry = await uploadMultipart([filePart(png, "application/octet-stream")], {
      idempotencyKey: key,
      boundary: "another-boundary-2"
    })
    expect(expectEnvelope(retry, 202).id).toBe(first.id)
    expect(retry.headers.get("idempotent-replayed")).toBe("true")
    expectError(await uploadMultipart([filePart(jpg)], { idempotencyKey: key }), 409, "idempotency_key_reused")
    expectError(
      await uploadMultipart([filePart(png), { name: "content_rating", value: "nsfw" }], { idempotencyKey: key }),
      409,
      "idempotency_key_reused"
    )
    // One image, not two.
    const all = await listAll(acct.key)
    expect(all.filter((i) => i.id === first.id)).toHaveLength(1)
  })

  it("replays a raw retry; the same bytes under another content type or query are another request (409)", async () => {
    const key = idem()
    const first = expectEnvelope(await uploadRaw(png, "image/png", { idempotencyKey: key }), 202)
    const retry = await uploadRaw(png, "image/png", { idempotencyKey: key })
    expect(expectEnvelope(retry, 202).id).toBe(first.id)
    expect(retry.headers.get("idempotent-replayed")).toBe("true")
    expectError(await uploadRaw(png, "image/jpeg", { idempotencyKey: key }), 409, "idempotency_key_reused")
    expectError(
      await uploadRaw(png, "image/png", { idempotencyKey: key, query: "?content_rating=nsfw" }),
      409,
      "idempotency_key_reused"
    )
  })

  it("does not store a 415 or 400: the key is usable once the request is fixed", async () => {
    const key = idem()
    expectError(await uploadRaw(svg(), "image/png", { idempotencyKey: key }), 415, "unsupported_media_type")
    expectError(await uploadRaw(Buffer.alloc(0), "image/png", { idempotencyKey: key }), 400, "invalid_request")
    expectEnvelope(await uploadRaw(png, "image/png", { idempotencyKey: key }), 202)
  })
})

describe("POST /images: size limit (413 without reading the rest)", () => {
  const headers = (contentType: string, extra: Record<string, string> = {}) => ({
    Authorization: `Bearer ${acct.key}`,
    "Idempotency-Key": idem(),
    "Content-Type": contentType,
    ...extra
  })

  it("refuses a declared Content-Length above 10485760 at once and closes the connection", async () => {
    for (const [type, length] of [
      ["image/jpeg", MAX_IMAGE_BYTES + 1],
      ["multipart/form-data; boundary=x", MAX_IMAGE_BYTES + 64 * 1024 + 1],
      ["image/png", 50 * 1024 * 1024 * 1024]
    ] as const) {
      // Only the head and a few bytes are sent: the answer must not wait for the body.
      const request = Buffer.concat([
        wire("POST", "/v1/images", headers(type, { "Content-Length": String(length) })),
        jpg.subarray(0, 100)
      ])
      const started = Date.now()
      const r = await rawRequest<ErrorBody>(t.baseUrl, request, 5_000)
      expect(r.status, r.text).toBe(413)
      expect(r.json.error.code).toBe("payload_too_large")
      expect(r.headers.connection).toBe("close")
      expect(Date.now() - started).toBeLessThan(3_000)
    }
  })

  it("closes the connection instead of reading the body of an upload refused before it is read (401)", async () => {
    const started = Date.now()
    const r = await rawRequest(
      t.baseUrl,
      wire("POST", "/v1/images", { "Content-Type": "image/png", "Content-Length": String(8 * 1024 * 1024) }),
      5_000
    )
    expect(r.status, r.text).toBe(401)
    expect(r.headers.connection).toBe("close")
    expect(Date.now() - started).toBeLessThan(3_000)
  })

  it("stops reading a chunked body at the limit: answers 413 while the client is still sending, then closes", async () => {
    const { port } = new URL(t.baseUrl)
    const socket = net.connect({ host: "127.0.0.1", port: Number(port) })
    await new Promise((resolve) => socket.once("connect", resolve))
    let response = ""
    let closed = false
    socket.on("data", (c) => {
      response += c.toString("latin1")
    })
    socket.on("error", () => {})
    socket.on("close", () => {
      closed = true
    })
    socket.write(
      `POST /v1/images HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${acct.key}\r\n` +
        `Idempotency-Key: ${idem()}\r\nContent-Type: image/jpeg\r\nTransfer-Encoding: chunked\r\n\r\n`
    )
    const total = 64 * 1024 * 1024
    const chunk = Buffer.alloc(256 * 1024, 0x61)
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")])
    let sent = 0
    const answered = () => response.includes("\r\n\r\n") || closed
    while (sent < total && !answered()) {
      const ok = socket.write(frame)
      sent += chunk.length
      if (!ok) {
        // The server stopped reading: wait for its answer or for the buffer to drain.
        let drained = false
        socket.once("drain", () => {
          drained = true
        })
        await waitFor(() => drained || answered(), { message: "the server to answer or to read on" })
      }
    }
    expect(response).toMatch(/^HTTP\/1\.1 413 /)
    expect(response.toLowerCase()).toContain("connection: close")
    expect(response).toContain("payload_too_large")
    // It answered long before the 64 MiB were sent: nothing was drained.
    expect(sent).toBeLessThan(total / 2)
    await waitFor(() => closed, { message: "the server to close the connection" })
    expect(closed).toBe(true)
    socket.destroy()
  })

  it("refuses a multipart file part above 10485760 bytes even when the body is within the form allowance", async () => {
    const big = Buffer.concat([png, Buffer.alloc(MAX_IMAGE_BYTES + 1 - png.length)])
    expectError(await uploadMultipart([filePart(big)]), 413, "payload_too_large")
  })

  it("accepts a file of exactly 10485760 bytes (a PNG with trailing bytes) as far as size goes", async () => {
    const exact = Buffer.concat([png, Buffer.alloc(MAX_IMAGE_BYTES - png.length)])
    expect(exact.length).toBe(MAX_IMAGE_BYTES)
    const r = await uploadRaw(exact, "image/png")
    expect(r.status, r.text).not.toBe(413)
  })
})

describe("POST /images: 415 for anything but JPEG, PNG, WebP or GIF bytes", () => {
  it.each([
    ["text/plain", "text/plain"],
    ["image/svg+xml", "image/svg+xml"],
    ["image/tiff", "image/tiff"],
    ["application/json", "application/json"],
    ["application/octet-stream", "application/octet-stream"],
    ["image/jpg (not a registered type)", "image/jpg"]
  ])("refuses Content-Type %s", async (_, type) => {
    expectError(await uploadRaw(png, type), 415, "unsupported_media_type", /Content-Type/)
  })

  it("refuses a missing Content-Type", async () => {
    const r = await rawRequest<ErrorBody>(
      t.baseUrl,
      wire("POST", "/v1/images", { Authorization: `Bearer ${acct.key}`, "Idempotency-Key": idem() }, png)
    )
    expect(r.status, r.text).toBe(415)
    expect(r.json.error.code).toBe("unsupported_media_type")
  })

  it("refuses SVG, TIFF and text bytes under an image content type, saying what they are", async () => {
    expectError(await uploadRaw(svg(), "image/png"), 415, "unsupported_media_type", /SVG/)
    expectError(await uploadRaw(await tiff(), "image/jpeg"), 415, "unsupported_media_type", /TIFF/)
    expectError(await uploadRaw(Buffer.from("hello, world\n"), "image/png"), 415, "unsupported_media_type", /text/)
    expectError(
      await uploadRaw(Buffer.from("<!doctype html><p>hi"), "image/gif"),
      415,
      "unsupported_media_type",
      /HTML/
    )
    expectError(await uploadMultipart([filePart(svg(), "image/svg+xml")]), 415, "unsupported_media_type", /SVG/)
  })

  it("refuses a truncated image header and a Content-Encoding", async () => {
    expectError(await uploadRaw(png.subarray(0, 12), "image/png"), 415, "unsupported_media_type")
    const r = await fetch(`${t.api}/images`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${acct.key}`,
        "idempotency-key": idem(),
        "content-type": "image/png",
        "content-encoding": "gzip"
      },
      body: png
    })
    expectError(await parse(r), 415, "unsupported_media_type", /Content-Encoding/)
  })
})

describe("POST /images: 400 for empty or malformed uploads", () => {
  it("refuses an empty raw body and an empty file part", async () => {
    expectError(await uploadRaw(Buffer.alloc(0), "image/png"), 400, "invalid_request")
    expectError(await uploadMultipart([filePart(Buffer.alloc(0))]), 400, "invalid_request", /file/)
  })

  it("refuses multipart without a file part, with two, or with a malformed body", async () => {
    expectError(await uploadMultipart([{ name: "content_rating", value: "auto" }]), 400, "invalid_request", /file/)
    expectError(await uploadMultipart([filePart(png), filePart(png)]), 400, "invalid_request", /file/)
    const boundary = "bnd"
    const cut = multipartBody([filePart(png)], boundary).subarray(0, 60)
    expectError(await uploadRaw(cut, `multipart/form-data; boundary=${boundary}`), 400, "invalid_request")
    expectError(await uploadRaw(Buffer.from("garbage"), "multipart/form-data"), 400, "invalid_request", /boundary/)
    expectError(
      await uploadRaw(Buffer.from("no boundary in here at all"), "multipart/form-data; boundary=zzz"),
      400,
      "invalid_request"
    )
    const badHeaders = Buffer.from(
      `--b\r\nContent-Disposition: form-data; name="file"; filename*=UTF-8''%E0%A4%A\r\n\r\nxx\r\n--b--\r\n`
    )
    const r = await uploadRaw(badHeaders, "multipart/form-data; boundary=b")
    expect([400, 415]).toContain(r.status)
  })

  it("refuses a content_rating that is not auto, general or nsfw, or a field that disagrees with the query", async () => {
    expectError(await uploadRaw(png, "image/png", { query: "?content_rating=sensitive" }), 400, "invalid_request")
    expectError(
      await uploadMultipart([filePart(png), { name: "content_rating", value: "unrated" }]),
      400,
      "invalid_request",
      /content_rating/
    )
    expectError(
      await uploadMultipart([filePart(png), { name: "content_rating", value: "general" }], {
        query: "?content_rating=nsfw"
      }),
      400,
      "invalid_request",
      /content_rating/
    )
  })
})

// --- scopes, ownership, reads --------------------------------------------------------------------

describe("scopes and ownership", () => {
  it("images:read cannot upload or import; images:write cannot list or read", async () => {
    const reader = await t.newKey(acct.accountId, ["images:read"])
    const writer = await t.newKey(acct.accountId, ["images:write"])
    expectError(await uploadRaw(png, "image/png", { key: reader }), 403, "api_scope_required", /images:write/)
    expectError(await importUrl(`${src}/img.png`, { key: reader }), 403, "api_scope_required", /images:write/)
    const image = expectEnvelope(await uploadRaw(png, "image/png", { key: writer }), 202)
    expectError(await get("/images", writer), 403, "api_scope_required", /images:read/)
    expectError(await get(`/images/${image.id}`, writer), 403, "api_scope_required", /images:read/)
    expectEnvelope(await get(`/images/${image.id}`, reader), 200)
    const patch = await call(`${t.api}/images/${image.id}/rating`, {
      method: "PATCH",
      key: reader,
      body: { content_rating: "nsfw" }
    })
    expectError(patch, 403, "api_scope_required", /images:write/)
  })

  it("answers 404 for another account's image, an unknown id and ids of a shape no image has", async () => {
    const image = expectEnvelope(await uploadRaw(png, "image/png"), 202)
    const other = await t.newAccount()
    expectError(await get(`/images/${image.id}`, other.key), 404, "not_found")
    const del = await call(`${t.api}/images/${image.id}`, { method: "DELETE", key: other.key })
    expectError(del, 404, "not_found")
    const rate = await call(`${t.api}/images/${image.id}/rating`, {
      method: "PATCH",
      key: other.key,
      body: { content_rating: "nsfw" }
    })
    expectError(rate, 404, "not_found")
    expect((await listAll(other.key)).map((i) => i.id)).not.toContain(image.id)
    for (const id of [
      "zzzzzzz",
      "abc",
      "a".repeat(65),
      "abc%00defg",
      "bad.id.x",
      "%E2%9C%93%E2%9C%93%E2%9C%93%E2%9C%93"
    ]) {
      expectError(await get(`/images/${id}`), 404, "not_found")
    }
    // A legacy-length id is looked up (and is simply not there).
    expectError(await get(`/images/${"L".repeat(40)}`), 404, "not_found")
  })

  it("an existing longer id with a legacy non-WebP url stays valid: read, listed, rated and deleted by its id", async () => {
    const owner = await t.newAccount()
    const id = `legacy_${randomBytes(12).toString("hex")}`
    await t.withImages(({ images, jobs }) =>
      Effect.gen(function* () {
        yield* images.insert({
          id: ImageId.make(id),
          accountId: AccountId.make(owner.accountId),
          unmetered: false,
          requestedRating: "auto",
          sourceFormat: "jpeg",
          sourceBytes: 2000,
          sourceUrl: null,
          mimeType: "image/jpeg",
          ext: "jpg"
        })
        yield* jobs.markReady(ImageId.make(id), {
          mimeType: "image/jpeg",
          ext: "jpg",
          blobKey: `legacy/${id}.jpg`,
          width: 10,
          height: 10,
          frames: 1,
          animated: false,
          bytes: 2000
        })
      })
    )
    const image = expectEnvelope(await get(`/images/${id}`, owner.key), 200)
    expect(image).toMatchObject({ id, status: "ready", mime_type: "image/jpeg", url: `${IMAGE_HOST}/${id}.jpg` })
    expect(expectEnvelope(await get<Page<Image>>("/images", owner.key), 200).map((i) => i.id)).toContain(id)
    const rated = await call<Envelope<Image>>(`${t.api}/images/${id}/rating`, {
      method: "PATCH",
      key: owner.key,
      body: { content_rating: "nsfw" }
    })
    expect(expectEnvelope(rated, 200).content_rating).toBe("nsfw")
    expectEnvelope(await call(`${t.api}/images/${id}`, { method: "DELETE", key: owner.key }), 200)
    expectError(await get(`/images/${id}`, owner.key), 404, "not_found")
  })

  it("pages GET /images newest first with cursors, like GET /links", async () => {
    const owner = await t.newAccount()
    const ids: Array<string> = []
    for (let i = 0; i < 5; i++) ids.push(expectEnvelope(await uploadRaw(png, "image/png", { key: owner.key }), 202).id)
    const page1 = await get<Page<Image>>("/images?limit=2", owner.key)
    expect(expectEnvelope(page1, 200).map((i) => i.id)).toEqual([ids[4], ids[3]])
    expect(page1.json.meta.next_cursor).toBeTypeOf("string")
    const all = await listAll(owner.key, 2)
    expect(all.map((i) => i.id)).toEqual([...ids].reverse())
    const defaults = await get<Page<Image>>("/images", owner.key)
    expect(expectEnvelope(defaults, 200)).toHaveLength(5)
    expect(defaults.json.meta.next_cursor).toBeNull()
    expectError(await get("/images?cursor=not-a-cursor", owner.key), 400, "invalid_request", /cursor/)
    expectError(await get("/images?limit=0", owner.key), 400, "invalid_request", /limit/)
    expectError(await get("/images?limit=101", owner.key), 400, "invalid_request", /limit/)
  })
})

// --- rating --------------------------------------------------------------------------------------

describe("PATCH /images/{id}/rating", () => {
  const rate = (id: string, content_rating: unknown, key = acct.key) =>
    call<Envelope<Image>>(`${t.api}/images/${id}/rating`, { method: "PATCH", key, body: { content_rating } }).then(
      noServerError
    )

  it("applies a stricter declaration at once (200) and records a less strict one for review (202, rating unchanged)", async () => {
    const image = expectEnvelope(await uploadRaw(png, "image/png"), 202)
    await markReady(image.id)
    const ready = expectEnvelope(await get(`/images/${image.id}`), 200)
    expect(ready.status).toBe("ready")
    expect(ready.content_rating).toBe("unrated")
    expect(ready.width).toBe(40)
    expect(ready.bytes).toBe(1234)
    expect(ready.animated).toBe(false)

    // unrated counts as nsfw: sensitive is less strict.
    const lower = expectEnvelope(await rate(image.id, "sensitive"), 202)
    expect(lower.content_rating).toBe("unrated")
    expect(lower.rating_review).toEqual({ requested: "sensitive", status: "pending" })

    const stricter = expectEnvelope(await rate(image.id, "nsfw"), 200)
    expect(stricter.content_rating).toBe("nsfw")
    expect(stricter.rating_source).toBe("owner")
    // The declaration that applied superseded the pending request.
    expect(stricter.rating_review?.status).not.toBe("pending")

    const again = expectEnvelope(await rate(image.id, "general"), 202)
    expect(again.content_rating).toBe("nsfw")
    expect(again.rating_review).toEqual({ requested: "general", status: "pending" })
    expect(expectEnvelope(await get(`/images/${image.id}`), 200)).toMatchObject({
      content_rating: "nsfw",
      rating_review: { requested: "general", status: "pending" }
    })
  })

  it("applies a declaration as strict as the owner's creation rating, and a stricter one, while processing", async () => {
    const image = expectEnvelope(await uploadRaw(png, "image/png", { query: "?content_rating=general" }), 202)
    expect(expectEnvelope(await rate(image.id, "general"), 200).content_rating).toBeNull()
    expect(expectEnvelope(await rate(image.id, "sensitive"), 200).status).toBe("processing")
    await markReady(image.id)
    const ready = expectEnvelope(await get(`/images/${image.id}`), 200)
    expect(ready.content_rating).toBe("sensitive")
    expect(ready.rating_source).toBe("owner")
  })

  it("every rating change is audited: the owner's declaration at creation, then each change, as rating_changes rows and image.rated events", async () => {
    const image = expectEnvelope(await uploadRaw(png, "image/png", { query: "?content_rating=general" }), 202)
    await markReady(image.id)
    expectEnvelope(await rate(image.id, "nsfw"), 200)
    expectEnvelope(await rate(image.id, "sensitive"), 202) // a review request, not a change
    const db = new pg.Client({ connectionString: t.databaseUrl })
    await db.connect()
    try {
      const changes = await db.query(
        "SELECT from_rating, to_rating, source, actor FROM rating_changes WHERE image_id = $1 ORDER BY seq",
        [image.id]
      )
      expect(changes.rows).toEqual([
        { from_rating: null, to_rating: "general", source: "owner", actor: acct.keyId },
        { from_rating: "general", to_rating: "nsfw", source: "owner", actor: acct.keyId }
      ])
      const events = await db.query("SELECT event FROM outbox WHERE key = $1 ORDER BY seq", [image.id])
      const rated = events.rows.map((r) => r.event).filter((e) => e.type === "image.rated")
      expect(rated.map((e) => e.data.change)).toEqual([
        { from: null, to: "general", source: "owner", actor: acct.keyId },
        { from: "general", to: "nsfw", source: "owner", actor: acct.keyId }
      ])
      expect(events.rows.map((r) => r.event.type)).toContain("image.rating_review_requested")
    } finally {
      await db.end()
    }
  })

  it("answers 409 image_failed for an image whose conversion failed", async () => {
    const image = expectEnvelope(await uploadRaw(png, "image/png"), 202)
    await t.withImages(({ jobs }) => jobs.markFailed(ImageId.make(image.id), "corrupt image data"))
    const failed = expectEnvelope(await get(`/images/${image.id}`), 200)
    expect(failed.status).toBe("failed")
    expect(failed.failure).toBe("corrupt image data")
    expectError(await rate(image.id, "nsfw"), 409, "image_failed", /corrupt/)
  })

  it("refuses ratings outside general, sensitive, nsfw and extra properties (400)", async () => {
    const image = expectEnvelope(await uploadRaw(png, "image/png"), 202)
    for (const value of ["unrated", "auto", "", null, 3]) {
      expectError(await rate(image.id, value), 400, "invalid_request", /content_rating/)
    }
    const extra = await call(`${t.api}/images/${image.id}/rating`, {
      method: "PATCH",
      key: acct.key,
      body: { content_rating: "nsfw", note: "x" }
    })
    expectError(extra, 400, "invalid_request", /note/)
  })
})

// --- delete --------------------------------------------------------------------------------------

describe("DELETE /images/{id}", () => {
  it("answers 200 with the image; then GET is 404, it leaves the list and its storage is freed", async () => {
    const owner = await t.newAccount()
    const keep = expectEnvelope(await uploadRaw(jpg, "image/jpeg", { key: owner.key }), 202)
    const before = expectEnvelope(await get<Envelope<Usage>>("/usage", owner.key), 200).images.storage_bytes.used
    const image = expectEnvelope(await uploadRaw(png, "image/png", { key: owner.key }), 202)
    expect(expectEnvelope(await get<Envelope<Usage>>("/usage", owner.key), 200).images.storage_bytes.used).toBe(
      before + png.length
    )
    const del = await call(`${t.api}/images/${image.id}`, { method: "DELETE", key: owner.key })
    expect(expectEnvelope(del, 200)).toMatchObject({ id: image.id, status: "processing" })
    expectError(await get(`/images/${image.id}`, owner.key), 404, "not_found")
    expect((await listAll(owner.key)).map((i) => i.id)).toEqual([keep.id])
    expect(expectEnvelope(await get<Envelope<Usage>>("/usage", owner.key), 200).images.storage_bytes.used).toBe(before)
    expectError(await call(`${t.api}/images/${image.id}`, { method: "DELETE", key: owner.key }), 404, "not_found")
  })

  it("frees the published size of a ready image", async () => {
    const owner = await t.newAccount()
    const image = expectEnvelope(await uploadRaw(png, "image/png", { key: owner.key }), 202)
    await markReady(image.id, 777)
    expect(expectEnvelope(await get<Envelope<Usage>>("/usage", owner.key), 200).images.storage_bytes.used).toBe(777)
    expectEnvelope(await call(`${t.api}/images/${image.id}`, { method: "DELETE", key: owner.key }), 200)
    expect(expectEnvelope(await get<Envelope<Usage>>("/usage", owner.key), 200).images.storage_bytes.used).toBe(0)
  })
})

// --- quotas --------------------------------------------------------------------------------------

describe("quotas", () => {
  it("refuses an upload past the plan's storage (403 quota_exceeded) and creates nothing; a Partner key skips it", async () => {
    const owner = await t.newAccount(undefined, { plan: "tinystore" })
    const small = Buffer.concat([png, Buffer.alloc(2000 - png.length)])
    const first = expectEnvelope(await uploadRaw(small, "image/png", { key: owner.key }), 202)
    const refused = await uploadRaw(small, "image/png", { key: owner.key })
    expectError(refused, 403, "quota_exceeded", /storage_bytes: 2000 of 3000 used/)
    expect((await listAll(owner.key)).map((i) => i.id)).toEqual([first.id])
    const usage = expectEnvelope(await get<Envelope<Usage>>("/usage", owner.key), 200)
    expect(usage.images.storage_bytes.used).toBe(2000)
    expect(usage.images.uploads.used).toBe(1)
    const partner = await t.newKey(owner.accountId, ["images:write", "images:read"], { unmetered: true })
    expectEnvelope(await uploadRaw(small, "image/png", { key: partner }), 202)
    expectEnvelope(await uploadRaw(small, "image/png", { key: partner }), 202)
  })

  it("refuses the upload past the monthly quota (403, stored and replayed); a Partner key skips it", async () => {
    const owner = await t.newAccount(undefined, { plan: "fewuploads" })
    expectEnvelope(await uploadRaw(png, "image/png", { key: owner.key }), 202)
    expectEnvelope(await importUrl(`${src}/img.png`, { key: owner.key }), 202)
    const key = idem()
    const refused = await uploadRaw(png, "image/png", { key: owner.key, idempotencyKey: key })
    expectError(refused, 403, "quota_exceeded", /image_uploads_per_month: 2 of 2 used/)
    const replay = await uploadRaw(png, "image/png", { key: owner.key, idempotencyKey: key })
    expectError(replay, 403, "quota_exceeded")
    expect(replay.headers.get("idempotent-replayed")).toBe("true")
    expect(await listAll(owner.key)).toHaveLength(2)
    const partner = await t.newKey(owner.accountId, ["images:write"], { unmetered: true })
    expectEnvelope(await uploadRaw(png, "image/png", { key: partner }), 202)
    const usage = expectEnvelope(await get<Envelope<Usage>>("/usage", owner.key), 200)
    expect(usage.images.uploads).toEqual({ used: 3, limit: 2 })
  })
})

// --- URL import ----------------------------------------------------------------------------------

describe("POST /images/url", () => {
  it("imports an image from a direct URL (202, processing record), following a safe redirect", async () => {
    const image = expectEnvelope(await importUrl(`${src}/img.png`), 202)
    expectProcessingRecord(image)
    const stored = Option.getOrThrow(await t.withImages(({ images }) => images.byId(image.id)))
    expect(stored.sourceUrl).toBe(`${src}/img.png`)
    expect(stored.sourceBytes).toBe(png.length)
    expectEnvelope(await importUrl(`${src}/to-img`), 202)
    // The bytes decide, not the source's Content-Type.
    expectEnvelope(await importUrl(`${src}/mislabelled.jpg`), 202)
    const declared = await importUrl("", { body: { url: `${src}/img.png`, content_rating: "nsfw" } })
    expect(
      Option.getOrThrow(await t.withImages(({ images }) => images.byId(declared.json.data.id))).requestedRating
    ).toBe("nsfw")
  })

  it("slow sources cannot hold every database connection: 30 imports at once all succeed while other requests are served", async () => {
    slowMax = 0
    const imports = Promise.all(Array.from({ length: 30 }, () => importUrl(`${src}/slow.png`)))
    await waitFor(() => slowInFlight >= 8, { message: "8 imports to be fetching from the slow source at once" })
    // The pool has 20 connections; imports run at most 8 at a time, so reads and writes go on.
    expectEnvelope(await get("/images?limit=1"), 200)
    expectEnvelope(await uploadRaw(png, "image/png"), 202)
    for (const r of await imports) expectEnvelope(r, 202)
    expect(slowMax).toBe(8)
  })

  it("refuses an HTML page and text under an image type (422 not_an_image)", async () => {
    expectError(await importUrl(`${src}/page.html`), 422, "not_an_image", /HTML/)
    expectError(await importUrl(`${src}/post`), 422, "not_an_image", /text/)
  })

  it("tells the client to upload the file as multipart when the source answers 403 (422 source_forbidden)", async () => {
    expectError(await importUrl(`${src}/forbidden`), 422, "source_forbidden", /multipart/)
  })

  it("refuses a response above 10485760 bytes, declared or streamed (422 source_too_large)", async () => {
    expectError(await importUrl(`${src}/huge`), 422, "source_too_large")
    expectError(await importUrl(`${src}/huge-chunked`), 422, "source_too_large")
  })

  it("refuses a redirect to a private or metadata address (422 redirect_not_allowed)", async () => {
    expectError(await importUrl(`${src}/to-private`), 422, "redirect_not_allowed", /10\.0\.0\.1/)
    expectError(await importUrl(`${src}/to-metadata`), 422, "redirect_not_allowed")
  })

  it("answers 422 source_unreachable for a 404 and a refused connection", async () => {
    expectError(await importUrl(`${src}/missing`), 422, "source_unreachable", /404/)
    const closed = net.createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    expectError(await importUrl(`http://127.0.0.1:${port}/x.png`), 422, "source_unreachable")
  })

  it.each([
    "http://169.254.169.254/latest/meta-data",
    "http://0xa9fea9fe/",
    "http://2852039166/",
    "http://10.0.0.1/x.png",
    "http://192.168.1.1/x.png",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://0.0.0.0/",
    "http://100.64.0.1/",
    "ftp://example.com/x.png",
    "file:///etc/passwd",
    "gopher://example.com/",
    "http://user:secret@example.com/x.png"
  ])("refuses %s (422 url_not_allowed)", async (url) => {
    expectError(await importUrl(url), 422, "url_not_allowed")
  })

  it("refuses bodies that break the schema (400)", async () => {
    for (const body of [
      { url: "not a url" },
      {},
      { url: 42 },
      { url: `${src}/img.png`, extra: true },
      { url: `${src}/img.png`, content_rating: "sensitive" },
      { url: `https://example.com/${"a".repeat(2048)}` }
    ]) {
      expectError(await importUrl("", { body }), 400, "invalid_request")
    }
  })
})

describe("POST /images/url without loopback allowed (production fetcher rules)", () => {
  let strict: TestApi
  let key: string
  beforeAll(async () => {
    strict = await startTestApi({ fetcher: { allowLoopback: false } })
    key = (await strict.newAccount()).key
  })
  afterAll(() => strict?.close())

  it.each([
    "http://127.0.0.1/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://2130706433/",
    "http://127.1/",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://localhost/"
  ])("refuses the loopback address %s (422 url_not_allowed)", async (url) => {
    expectError(await importUrl(url, { api: strict, key }), 422, "url_not_allowed")
  })

  it("refuses the local image server too", async () => {
    expectError(await importUrl(`${src}/img.png`, { api: strict, key }), 422, "url_not_allowed")
  })
})
