import * as net from "node:net"
import { expect } from "vitest"
import type { Reply } from "./api.js"
import type { ApiError } from "./resources.js"

export type { Reply } from "./api.js"

/** `value?.[key]` for a parsed JSON value: undefined unless `value` is an object (or array). */
export const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? Reflect.get(value, key) : undefined

const expectString: (value: unknown, message: string) => asserts value is string = (value, message) => {
  expect(value, message).toBeTypeOf("string")
}

/**
 * Asserts the contract's error shape: `error.code`, `error.message` and `error.request_id`
 * are strings, `X-Request-Id` is the same id, and the status and code are the expected ones.
 */
export const expectError = (r: Reply, status: number, code: string, detail?: RegExp): ApiError => {
  expect(r.status, r.text).toBe(status)
  expect(r.headers.get("content-type") ?? "", r.text).toMatch(/^application\/json/)
  expect(r.json, r.text).toBeTypeOf("object")
  const error = field(r.json, "error")
  expect(error, r.text).toBeTypeOf("object")
  expect(field(error, "code"), r.text).toBe(code)
  const message = field(error, "message")
  expectString(message, r.text)
  expect(message.length, r.text).toBeGreaterThan(0)
  const requestId = field(error, "request_id")
  expectString(requestId, r.text)
  expect(requestId.length, r.text).toBeGreaterThan(0)
  expect(r.headers.get("x-request-id"), r.text).toBe(requestId)
  const errorDetail = field(error, "detail")
  if (errorDetail !== undefined) expect(errorDetail, r.text).toBeTypeOf("string")
  if (detail !== undefined) expect(errorDetail ?? "", r.text).toMatch(detail)
  // Checked above: code, message and request_id are strings, detail a string or absent.
  return error as ApiError
}

/** What `data` holds in a body of type B; unknown when B does not say. */
export type DataOf<B> = B extends { readonly data: infer D } ? D : unknown

/** Asserts a success envelope: `data`, and `meta.request_id` equal to `X-Request-Id`. */
export const expectEnvelope = <B>(r: Reply<B>, status: number): DataOf<B> => {
  expect(r.status, r.text).toBe(status)
  expect(r.headers.get("content-type") ?? "", r.text).toMatch(/^application\/json/)
  const data = field(r.json, "data")
  expect(data, r.text).toBeDefined()
  const requestId = field(field(r.json, "meta"), "request_id")
  expect(requestId, r.text).toBeTypeOf("string")
  expect(r.headers.get("x-request-id"), r.text).toBe(requestId)
  // `data` is there; its shape is the one the caller declared for the body.
  return data as DataOf<B>
}

export interface RawReply<B = unknown> {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: Buffer
  readonly text: string
  /** The parsed body (undefined when it is not JSON), as the caller declares it: not validated. */
  readonly json: B
}

const decodeChunked = (body: Buffer): Buffer => {
  const parts: Array<Buffer> = []
  let offset = 0
  while (offset < body.length) {
    const lineEnd = body.indexOf("\r\n", offset)
    if (lineEnd < 0) break
    const size = Number.parseInt(body.subarray(offset, lineEnd).toString(), 16)
    if (!Number.isFinite(size) || size === 0) break
    parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size))
    offset = lineEnd + 2 + size + 2
  }
  return Buffer.concat(parts)
}

/**
 * Sends the exact bytes given (request line, headers, body) over a new TCP connection and
 * reads one response: for requests `fetch` refuses to send (odd methods, raw bytes in the
 * path, no Content-Type with a body). The request should carry `Connection: close`.
 */
export const rawRequest = <B = unknown>(
  baseUrl: string,
  bytes: Buffer | string,
  timeoutMs = 10_000
): Promise<RawReply<B>> => {
  const { hostname, port } = new URL(baseUrl)
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) })
    const chunks: Array<Buffer> = []
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`no response within ${timeoutMs} ms`))
    }, timeoutMs)
    socket.on("data", (c) => chunks.push(c))
    socket.on("error", () => {})
    socket.on("close", () => {
      clearTimeout(timer)
      const all = Buffer.concat(chunks)
      const headEnd = all.indexOf("\r\n\r\n")
      if (headEnd < 0) return reject(new Error(`no HTTP response: ${JSON.stringify(all.toString())}`))
      const [statusLine, ...lines] = all.subarray(0, headEnd).toString("latin1").split("\r\n")
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const i = line.indexOf(":")
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
      }
      let body: Buffer = all.subarray(headEnd + 4)
      if (/chunked/i.test(headers["transfer-encoding"] ?? "")) body = decodeChunked(body)
      const text = body.toString()
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        json = undefined
      }
      // The body as the caller declares it (see RawReply).
      resolve({ status: Number(statusLine!.split(" ")[1]), headers, body, text, json: json as B })
    })
    socket.write(bytes)
  })
}

/** A request in wire form: request line, headers (with Host and Connection: close) and body. */
export const wire = (
  method: string,
  path: string | Buffer,
  headers: Record<string, string | Buffer>,
  body?: Buffer | string
): Buffer => {
  const parts: Array<Buffer> = [Buffer.from(`${method} `), Buffer.isBuffer(path) ? path : Buffer.from(path)]
  parts.push(Buffer.from(" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"))
  const all: Record<string, string | Buffer> = { ...headers }
  if (body !== undefined) all["Content-Length"] = String(Buffer.byteLength(body))
  for (const [name, value] of Object.entries(all)) {
    parts.push(Buffer.from(`${name}: `), Buffer.isBuffer(value) ? value : Buffer.from(value), Buffer.from("\r\n"))
  }
  parts.push(Buffer.from("\r\n"))
  if (body !== undefined) parts.push(Buffer.isBuffer(body) ? body : Buffer.from(body))
  return Buffer.concat(parts)
}

/** RFC 4180 parsing: quoted fields may hold commas, quotes ("") and line breaks. */
export const parseCsv = (text: string): Array<Array<string>> => {
  const rows: Array<Array<string>> = []
  let row: Array<string> = []
  let field = ""
  let i = 0
  let quoted = false
  while (i < text.length) {
    const c = text[i]!
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"'
        i += 2
      } else if (c === '"') {
        quoted = false
        i++
      } else {
        field += c
        i++
      }
    } else if (c === '"' && field === "") {
      quoted = true
      i++
    } else if (c === ",") {
      row.push(field)
      field = ""
      i++
    } else if (c === "\r" && text[i + 1] === "\n") {
      row.push(field)
      rows.push(row)
      row = []
      field = ""
      i += 2
    } else {
      field += c
      i++
    }
  }
  if (field !== "" || row.length > 0) {
    row.push(field)
    rows.push(row)
  }
  return rows
}

export const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

/** Width and height from a PNG's IHDR chunk (which must come first). */
export const pngSize = (png: Buffer) => {
  expect(png.subarray(0, 8).equals(PNG_MAGIC), "PNG signature").toBe(true)
  expect(png.subarray(12, 16).toString("latin1"), "first chunk is IHDR").toBe("IHDR")
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) }
}

/** Fetches a binary body (`call` reads text, which mangles bytes). */
export const fetchBytes = async (url: string, key: string) => {
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) }
}

/** A small deterministic PRNG (mulberry32), so a fuzz failure can be replayed. */
export const prng = (seed: number) => {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(next() * xs.length)]!,
    bytes: (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256)))
  }
}

/**
 * A fixed pause, only where the time itself is the point (a client doing what Retry-After
 * says, pacing): never to wait for something to happen; that is waitFor (./waitFor.ts).
 */
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
