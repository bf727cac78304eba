import { inflateSync } from "node:zlib"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope, expectError, fetchBytes, parseCsv, pngSize } from "../support/http.js"
import type { Envelope, Link } from "../support/resources.js"
import { waitFor } from "../support/waitFor.js"

const SHORT_BASE = "http://sho.rt"
const COLUMNS = [
  "id",
  "slug",
  "short_url",
  "destination_url",
  "publication_status",
  "created_at",
  "updated_at",
  "expires_at"
]

let t: TestApi
let acct: TestAccount
beforeAll(async () => {
  t = await startTestApi({ shortBase: SHORT_BASE })
  acct = await t.newAccount()
})
afterAll(() => t.close())

const create = async (key: string, body: unknown) =>
  expectEnvelope(await call<Envelope<Link>>(`${t.api}/links`, { method: "POST", key, body }), 201)

const csvOf = async (key: string, query = "") => {
  const r = await call(`${t.api}/links.csv${query}`, { key })
  expect(r.status, r.text).toBe(200)
  return r
}

/** Runs SQL on the test database directly: for rows the API no longer accepts. */
const sql = async (text: string, values: Array<unknown>) => {
  const client = new pg.Client({ connectionString: t.databaseUrl })
  await client.connect()
  try {
    await client.query(text, values)
  } finally {
    await client.end()
  }
}

describe("GET /links.csv", () => {
  let exporter: TestAccount
  const made: Array<Link> = []
  beforeAll(async () => {
    exporter = await t.newAccount()
    // Each created once the clock has passed the previous one's created_at (shown in
    // milliseconds), so that created_at orders them.
    const clockPast = (link: { created_at: string }) =>
      waitFor(() => Date.now() > Date.parse(link.created_at), { message: `the clock to pass ${link.created_at}` })
    made.push(await create(exporter.key, { url: "https://example.com/plain" }))
    await clockPast(made[0])
    made.push(
      await create(exporter.key, { url: "https://example.com/?a=1,2&b=%22quoted%22", custom_slug: "csv-commas" })
    )
    await clockPast(made[1])
    made.push(await create(exporter.key, { url: "https://example.com/to-disable" }))
    expectEnvelope(await call(`${t.api}/links/${made[2].id}`, { method: "DELETE", key: exporter.key }), 200)
    made[2] = expectEnvelope(await call<Envelope<Link>>(`${t.api}/links/${made[2].id}`, { key: exporter.key }), 200)
    await clockPast(made[2])
    // A destination stored before the API required RFC 3986 URIs may hold a double quote.
    await sql(
      `INSERT INTO links (id, account_id, slug, destination_url, status)
       VALUES ('link_LegacyQuotes0000000000', $1, 'csv-quotes', $2, 'active')`,
      [exporter.accountId, 'https://example.com/?a=1,2&b="quoted"']
    )
    made.push(
      expectEnvelope(
        await call<Envelope<Link>>(`${t.api}/links/link_LegacyQuotes0000000000`, { key: exporter.key }),
        200
      )
    )
  })

  it("is text/csv with a header row, CRLF line ends and one row per link", async () => {
    const r = await csvOf(exporter.key)
    expect(r.headers.get("content-type")).toMatch(/^text\/csv/)
    expect(r.text.endsWith("\r\n")).toBe(true)
    expect(r.text.replace(/\r\n/g, "")).not.toMatch(/[\r\n]/)
    const rows = parseCsv(r.text)
    expect(rows[0]).toEqual(COLUMNS)
    expect(rows).toHaveLength(1 + made.length)
    for (const row of rows) expect(row).toHaveLength(COLUMNS.length)
  })

  it("rows hold the link fields, newest first, with commas and quotes quoted per RFC 4180", async () => {
    const r = await csvOf(exporter.key)
    const rows = parseCsv(r.text).slice(1)
    expect(rows.map((row) => row[0])).toEqual([...made].reverse().map((l) => l.id))
    for (const row of rows) {
      const link = made.find((l) => l.id === row[0])!
      expect(row).toEqual([
        link.id,
        link.slug,
        link.short_url,
        link.destination_url,
        link.publication_status,
        link.created_at,
        link.updated_at,
        link.expires_at ?? ""
      ])
    }
    expect(r.text).toContain('"https://example.com/?a=1,2&b=%22quoted%22"')
    expect(r.text).toContain('"https://example.com/?a=1,2&b=""quoted"""')
  })

  it("includes disabled links", async () => {
    const rows = parseCsv((await csvOf(exporter.key)).text)
    const disabled = rows.find((row) => row[0] === made[2].id)
    expect(disabled?.[4]).toBe("disabled")
  })

  it("takes the search filters of GET /links: q, status, created_after, created_before", async () => {
    const ids = async (query: string) =>
      parseCsv((await csvOf(exporter.key, query)).text)
        .slice(1)
        .map((row) => row[0])
    const [plain, commas, disabled, legacy] = made
    expect(await ids("?status=disabled")).toEqual([disabled.id])
    expect(await ids("?status=active")).toEqual([legacy.id, commas.id, plain.id])
    expect(await ids("?q=CSV-")).toEqual([legacy.id, commas.id])
    expect(await ids(`?q=${encodeURIComponent("%22")}`)).toEqual([commas.id])
    expect(await ids("?q=csv-&status=active")).toEqual([legacy.id, commas.id])
    expect(await ids("?q=no-such-link")).toEqual([])
    expect(await ids(`?created_after=${encodeURIComponent(disabled.created_at)}`)).toEqual([legacy.id])
    expect(await ids(`?created_before=${encodeURIComponent(commas.created_at)}`)).toEqual([plain.id])
    expect(await ids("?created_after=2000-01-01&created_before=2999-01-01")).toHaveLength(made.length)
    expect(await ids("?created_before=2000-01-01")).toEqual([])
    // A filtered export still starts with the header row.
    expect((await csvOf(exporter.key, "?q=no-such-link")).text).toBe(`${COLUMNS.join(",")}\r\n`)
  })

  it.each([
    ["status", "deleted"],
    ["status", ""],
    ["created_after", "yesterday"],
    ["created_after", "2024-02-30"],
    ["created_before", "2024/01/01"],
    ["q", "a\u0000b"],
    ["q", "x".repeat(2049)]
  ])("rejects %s=%j with 400 invalid_request naming the parameter", async (name, value) => {
    const r = await call(`${t.api}/links.csv?${name}=${encodeURIComponent(value)}`, { key: exporter.key })
    expectError(r, 400, "invalid_request", new RegExp(`^${name}:`))
  })

  it("filters a large export across its paged reads", async () => {
    const bulk = await t.newAccount()
    await sql(
      `INSERT INTO links (id, account_id, slug, destination_url, status)
       SELECT 'link_filt' || lpad(i::text, 17, '0'), $1, 'filt' || i, 'https://example.com/filt/' || i,
              CASE WHEN i % 3 = 0 THEN 'disabled' ELSE 'active' END
       FROM generate_series(1, 1200) AS i ORDER BY i`,
      [bulk.accountId]
    )
    const rows = parseCsv((await csvOf(bulk.key, "?status=disabled")).text).slice(1)
    expect(rows).toHaveLength(400)
    expect(rows.every((row) => row[4] === "disabled")).toBe(true)
    expect(rows.map((row) => row[1])).toEqual(Array.from({ length: 400 }, (_, i) => `filt${1200 - 3 * i}`))
  })

  it("an account without links gets the header row alone", async () => {
    const empty = await t.newAccount()
    const r = await csvOf(empty.key)
    expect(r.text).toBe(`${COLUMNS.join(",")}\r\n`)
  })

  it("exports every one of more than 1000 links exactly once, newest first (paged reads of 500)", async () => {
    const bulk = await t.newAccount()
    const total = 1234
    const client = new pg.Client({ connectionString: t.databaseUrl })
    await client.connect()
    try {
      await client.query(
        `INSERT INTO links (id, account_id, slug, destination_url, status)
         SELECT 'link_bulk' || lpad(i::text, 17, '0'), $1, 'bulk' || i, 'https://example.com/bulk/' || i || '?x=a,b',
                CASE WHEN i % 7 = 0 THEN 'disabled' ELSE 'active' END
         FROM generate_series(1, $2::int) AS i ORDER BY i`,
        [bulk.accountId, total]
      )
    } finally {
      await client.end()
    }
    const other = await create(acct.key, { url: "https://example.com/not-in-bulk" })
    const r = await csvOf(bulk.key)
    const rows = parseCsv(r.text)
    expect(rows[0]).toEqual(COLUMNS)
    const body = rows.slice(1)
    expect(body).toHaveLength(total)
    const ids = body.map((row) => row[0])
    expect(new Set(ids).size).toBe(total)
    expect(ids).not.toContain(other.id)
    // Newest first: inserted in order 1..total, so the export runs total..1.
    expect(body.map((row) => row[1])).toEqual(Array.from({ length: total }, (_, i) => `bulk${total - i}`))
    expect(body.filter((row) => row[4] === "disabled")).toHaveLength(Math.floor(total / 7))
    expect(body[0]![3]).toBe(`https://example.com/bulk/${total}?x=a,b`)
    expect(body[0]![2]).toBe(`${SHORT_BASE}/bulk${total}`)
  })
})

/** The pixel rows of an 8-bit RGB(A) or greyscale PNG without interlace, unfiltered. */
const pngRows = (png: Buffer) => {
  const { width, height } = pngSize(png)
  const bitDepth = png[24]!
  const colorType = png[25]!
  expect(bitDepth).toBe(8)
  const channels = ({ 0: 1, 2: 3, 4: 2, 6: 4 } as Record<number, number>)[colorType]!
  const idat: Array<Buffer> = []
  for (let offset = 8; offset < png.length; ) {
    const length = png.readUInt32BE(offset)
    const type = png.subarray(offset + 4, offset + 8).toString("latin1")
    if (type === "IDAT") idat.push(png.subarray(offset + 8, offset + 8 + length))
    offset += 12 + length
  }
  const raw = inflateSync(Buffer.concat(idat))
  const stride = width * channels
  const rows: Array<Buffer> = []
  let prev = Buffer.alloc(stride)
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!
    const line = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)))
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? line[x - channels]! : 0
      const b = prev[x]!
      const c = x >= channels ? prev[x - channels]! : 0
      const p = a + b - c
      const pa = Math.abs(p - a)
      const pb = Math.abs(p - b)
      const pc = Math.abs(p - c)
      const predictor = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][filter]!
      line[x] = (line[x]! + predictor) & 0xff
    }
    rows.push(line)
    prev = line
  }
  return { width, height, channels, rows }
}

describe("GET /links/{id}/qr", () => {
  let link: Link
  let longLink: Link
  beforeAll(async () => {
    link = await create(acct.key, { url: "https://example.com/qr" })
    longLink = await create(acct.key, { url: "https://example.com/qr-long", custom_slug: "q".repeat(32) })
  })
  const qr = (id: string, query = "") => fetchBytes(`${t.api}/links/${id}/qr${query}`, acct.key)

  it("is a PNG by default, 512 pixels square", async () => {
    const r = await qr(link.id)
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toBe("image/png")
    expect(pngSize(r.body)).toEqual({ width: 512, height: 512 })
  })

  it("the PNG is a QR symbol: dark and light modules inside a light quiet zone (4 modules by default, none with margin=0)", async () => {
    const firstDark = async (query: string) => {
      const { rows, channels, width } = pngRows((await qr(link.id, query)).body)
      const isDark = (y: number, x: number) => rows[y]![x * channels]! < 128
      let dark = 0
      for (let y = 0; y < width; y++) for (let x = 0; x < width; x++) if (isDark(y, x)) dark++
      expect(dark).toBeGreaterThan(width * width * 0.2)
      expect(dark).toBeLessThan(width * width * 0.7)
      const row = rows.findIndex((_, y) => Array.from({ length: width }, (_, x) => isDark(y, x)).some(Boolean))
      const column = Array.from({ length: width }, (_, x) => x).find((x) => rows.some((_, y) => isDark(y, x)))
      return { row, column }
    }
    // 21 to 29 modules plus 2 x 4 of quiet zone in 400 px: the symbol starts 43 to 56 px in.
    const framed = await firstDark("?size=400")
    expect(framed.row).toBe(framed.column)
    expect(framed.row).toBeGreaterThanOrEqual(43)
    expect(framed.row).toBeLessThanOrEqual(56)
    // Without a margin the finder pattern touches the corner.
    expect(await firstDark("?size=400&margin=0")).toEqual({ row: 0, column: 0 })
  })

  it.each([64, 65, 100, 113, 201, 255, 333, 512, 1000, 1706, 2048])(
    "size=%i gives a PNG exactly that many pixels wide and high",
    async (size) => {
      const r = await qr(link.id, `?size=${size}`)
      expect(r.status).toBe(200)
      expect(pngSize(r.body)).toEqual({ width: size, height: size })
    }
  )

  it("the size holds for every margin and error correction level, also for a long slug at the smallest size", async () => {
    for (const id of [link.id, longLink.id]) {
      for (const ecc of ["L", "M", "Q", "H"]) {
        for (const margin of [0, 1, 4, 16]) {
          for (const size of [64, 113, 777]) {
            const r = await qr(id, `?size=${size}&margin=${margin}&ecc=${ecc}`)
            expect(r.status, `${id} ${size} ${margin} ${ecc}`).toBe(200)
            expect(pngSize(r.body), `size=${size}&margin=${margin}&ecc=${ecc}`).toEqual({ width: size, height: size })
          }
        }
      }
    }
  })

  it("margin and ecc change the image", async () => {
    const base = (await qr(link.id, "?size=300")).body
    expect((await qr(link.id, "?size=300&margin=0")).body.equals(base)).toBe(false)
    expect((await qr(link.id, "?size=300&ecc=H")).body.equals(base)).toBe(false)
    expect((await qr(link.id, "?size=300&ecc=M&margin=4")).body.equals(base)).toBe(true)
  })

  it("format=svg is image/svg+xml of the requested size", async () => {
    const r = await qr(link.id, "?format=svg&size=300")
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toMatch(/^image\/svg\+xml/)
    const svg = r.body.toString()
    expect(svg).toMatch(/^<svg[\s>]/)
    expect(svg).toMatch(/width="300"/)
    expect(svg).toMatch(/height="300"/)
    expect(svg).toContain("</svg>")
  })

  it("format=png is the default PNG", async () => {
    const r = await qr(link.id, "?format=png")
    expect(r.headers.get("content-type")).toBe("image/png")
    expect(r.body.equals((await qr(link.id)).body)).toBe(true)
  })

  it.each([
    ["size", "63"],
    ["size", "2049"],
    ["size", "0"],
    ["size", "-512"],
    ["size", "abc"],
    ["size", "512.5"],
    ["size", "1e3"],
    ["size", ""],
    ["margin", "-1"],
    ["margin", "17"],
    ["margin", "x"],
    ["ecc", "X"],
    ["ecc", "l"],
    ["ecc", ""],
    ["format", "gif"],
    ["format", "PNG"],
    ["format", "jpeg"]
  ])("%s=%j is 400 invalid_request naming it", async (name, value) => {
    const r = await call(`${t.api}/links/${link.id}/qr?${name}=${encodeURIComponent(value)}`, { key: acct.key })
    expectError(r, 400, "invalid_request", new RegExp(name))
  })

  it("accepts the bounds: size 64 and 2048, margin 0 and 16", async () => {
    for (const query of ["size=64", "size=2048", "margin=0", "margin=16"]) {
      expect((await qr(link.id, `?${query}`)).status, query).toBe(200)
    }
  })

  it("a domain that is not a verified custom domain of the account is 400 naming domain", async () => {
    for (const domain of ["unknown.example", "sho.rt", ""]) {
      const r = await call(`${t.api}/links/${link.id}/qr?domain=${domain}`, { key: acct.key })
      expectError(r, 400, "invalid_request", /domain/)
    }
  })

  it("an unknown link is 404 not_found", async () => {
    expectError(await call(`${t.api}/links/link_Unknown000000000000000/qr`, { key: acct.key }), 404, "not_found")
  })
})
