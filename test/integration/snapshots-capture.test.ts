import { createHash } from "node:crypto"
import * as csstree from "css-tree"
import { type DefaultTreeAdapterMap, parse } from "parse5"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseSrcset } from "../../apps/workers/snapshot/Srcset.js"
import { call, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope } from "../support/http.js"
import type { Envelope, Snapshot } from "../support/resources.js"
import { startSnapshotWorld } from "../support/snapshotSite.js"
import { filesUnder } from "../support/snapshots.js"
import { waitFor } from "../support/waitFor.js"

let world: Awaited<ReturnType<typeof startSnapshotWorld>>
let t: TestApi
let acct: TestAccount
let site: typeof world.site
let host: typeof world.host
let blobDir: string

beforeAll(async () => {
  world = await startSnapshotWorld()
  ;({ t, site, host, blobDir } = world)
  acct = await t.newAccount()
})
afterAll(() => world?.close())

const request = async (url: string) => {
  const r = await call<Envelope<Snapshot>>(`${t.api}/snapshots`, { method: "POST", key: acct.key, body: { url } })
  return expectEnvelope(r, 202)
}

/** Polls until the capture ends (captured or failed). */
const settled = (id: string) =>
  waitFor(
    async () => {
      const r = await call<Envelope<Snapshot>>(`${t.api}/snapshots/${id}`, { key: acct.key })
      const s = expectEnvelope(r, 200)
      return s.capture_status === "captured" || s.capture_status === "failed" ? s : false
    },
    { timeoutMs: 90_000, message: `snapshot ${id} to settle` }
  )

/** The served copy on the test's snapshot host (snapshot_url's path on its real port). */
const served = (s: Snapshot, rest = "") => fetch(`${host.origin}${new URL(s.snapshot_url).pathname}${rest}`)

type Element = DefaultTreeAdapterMap["element"]
const elements = (node: DefaultTreeAdapterMap["parentNode"]): Array<Element> =>
  node.childNodes.flatMap((c) => ("tagName" in c ? [c, ...elements(c)] : []))
const cssUrls = (text: string, context: "stylesheet" | "declarationList") => {
  const out: Array<string> = []
  csstree.walk(csstree.parse(text, { context }), (n) => {
    if (n.type === "Url") out.push(n.value)
    if (n.type === "Atrule" && n.name === "import" && n.prelude?.type === "AtrulePrelude") {
      const first = n.prelude.children.first
      if (first?.type === "String") out.push(first.value)
    }
  })
  return out
}

describe("capturing a local page with images, CSS, fonts, srcset and scripts", () => {
  let snap: Snapshot
  beforeAll(async () => {
    const queued = await request(`${site.origin}/page.html`)
    expect(queued.capture_status).toBe("queued")
    expect(queued.publication_status).toBe("unpublished")
    snap = await settled(queued.id)
  }, 120_000)

  it("ends captured and published, with the page's status, title, type, size, hash and resource totals", () => {
    expect(snap.failure).toBeNull()
    expect(snap.capture_status).toBe("captured")
    expect(snap.publication_status).toBe("published")
    expect(snap.http_status).toBe(200)
    expect(snap.title).toBe("Local test page")
    expect(snap.final_url).toBe(`${site.origin}/page.html`)
    expect(snap.content_type).toMatch(/^text\/html/)
    // hero, body-bg, a, a-1x, a-2x, pic, pic-fallback, slow, css-bg, deep, border, favicon, 3 css, font
    expect(snap.resources.count).toBe(16)
    expect(snap.sha256).toMatch(/^[0-9a-f]{64}$/)
  })

  it("never fetched scripts, frames, media or preloads, and fetched each stylesheet, image and font once", () => {
    for (const p of ["/js/app.js", "/js/preloaded.js", "/frame.html", "/media/movie.mp4", "/img/poster.png"]) {
      expect(site.hits.get(p) ?? 0, p).toBe(0)
    }
    for (const p of [
      "/css/main.css",
      "/css/imported.css",
      "/css/inline-import.css",
      "/fonts/t.woff2",
      "/img/deep.png"
    ]) {
      expect(site.hits.get(p), p).toBe(1)
    }
  })

  it("serves the page on the snapshot host with the sandbox CSP, no cookie, noindex, no-referrer, nosniff and the capture notice", async () => {
    const r = await served(snap)
    expect(r.status).toBe(200)
    expect(r.headers.get("content-security-policy")).toBe(
      "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; font-src 'self'; form-action 'none'"
    )
    expect(r.headers.get("x-robots-tag")).toMatch(/noindex/)
    expect(r.headers.get("referrer-policy")).toBe("no-referrer")
    expect(r.headers.get("x-content-type-options")).toBe("nosniff")
    expect(r.headers.get("set-cookie")).toBeNull()
    const html = await r.text()
    expect(html).toContain("Hello snapshot")
    expect(html).toContain(`Snapshot captured ${snap.captured_at} from ${site.origin}/page.html`)
    expect(html).not.toMatch(/<script|<iframe|<video|onload=|app\.js/i)
    // Byte for byte the same on every read.
    const again = await (await served(snap)).text()
    expect(again).toBe(html)
  })

  it("rewrites every URL of the served HTML and CSS to the snapshot host (or data:)", async () => {
    const pageUrl = `${host.origin}${new URL(snap.snapshot_url).pathname}`
    const html = await (await served(snap)).text()
    const doc = parse(html)
    const found: Array<{ url: string; base: string }> = []
    const stylesheets: Array<string> = []
    for (const el of elements(doc)) {
      for (const a of el.attrs) {
        if (["src", "href", "background", "poster", "action", "data", "xlink:href"].includes(a.name)) {
          found.push({ url: a.value, base: pageUrl })
        }
        if (a.name === "srcset") for (const c of parseSrcset(a.value)) found.push({ url: c.url, base: pageUrl })
        if (a.name === "style")
          for (const u of cssUrls(a.value, "declarationList")) found.push({ url: u, base: pageUrl })
      }
      if (el.tagName === "style") {
        const text = el.childNodes.map((c) => ("value" in c ? c.value : "")).join("")
        for (const u of cssUrls(text, "stylesheet")) found.push({ url: u, base: pageUrl })
      }
      if (el.tagName === "link" && el.attrs.some((a) => a.name === "rel" && a.value === "stylesheet")) {
        stylesheets.push(new URL(el.attrs.find((a) => a.name === "href")!.value, pageUrl).href)
      }
    }
    expect(stylesheets.length).toBe(1)
    for (const sheet of stylesheets) {
      const r = await fetch(sheet)
      expect(r.status).toBe(200)
      expect(r.headers.get("content-type")).toMatch(/^text\/css/)
      const text = await r.text()
      for (const u of cssUrls(text, "stylesheet")) found.push({ url: u, base: sheet })
    }
    expect(found.length).toBeGreaterThan(12)
    for (const { url, base } of found) {
      const resolved = new URL(url, base)
      if (resolved.protocol === "data:") continue
      expect(resolved.origin, url).toBe(host.origin)
      // Every rewritten reference is served, from this snapshot.
      expect((await fetch(resolved)).status, url).toBe(200)
    }
  })

  it("stores identical bytes once: a second capture of the same page adds no resource blob", async () => {
    const before = filesUnder(blobDir).length
    const second = await settled((await request(`${site.origin}/page.html`)).id)
    expect(second.capture_status).toBe("captured")
    // The served page differs (its notice names another capture time); every resource is the same.
    expect(filesUnder(blobDir).length).toBeLessThanOrEqual(before + 1)
    expect(second.sha256).toBe(snap.sha256)
  })
})

describe("captures that follow redirects, meet limits or fail", () => {
  it("follows safe redirects and records the final URL", async () => {
    const s = await settled((await request(`${site.origin}/redirect`)).id)
    expect(s.capture_status).toBe("captured")
    expect(s.final_url).toBe(`${site.origin}/page.html`)
  })

  it.each([
    ["a redirect hop to a private address", "/to-private", /^redirect_not_allowed: .*10\.1\.2\.3/],
    ["a redirect hop to the metadata address", "/to-metadata", /^redirect_not_allowed: .*169\.254\.169\.254/],
    ["a page over 10 MiB", "/huge.html", /^source_too_large: the page is larger than 10485760 bytes/],
    ["an origin answering 404", "/gone.html", /^source_rejected: the site answered HTTP 404/],
    ["an origin answering 500", "/broken.html", /^source_unreachable: .*\(after 4 attempts\)/],
    ["a page slower than the page timeout", "/slow.html", /^source_unreachable: no complete answer within 4000 ms/]
  ])(
    "%s ends failed with a reason",
    async (_what, path, reason) => {
      const s = await settled((await request(`${site.origin}${path}`)).id)
      expect(s.capture_status).toBe("failed")
      expect(s.publication_status).toBe("unpublished")
      expect(s.failure).toMatch(reason)
      expect((await served(s)).status).toBe(404)
    },
    120_000
  )

  it("keeps to the resource budget: 100 of 120 images are stored, the page is still captured", async () => {
    const s = await settled((await request(`${site.origin}/many.html`)).id)
    expect(s.capture_status).toBe("captured")
    expect(s.resources.count).toBe(100)
    const html = await (await served(s)).text()
    expect(html.match(/src="r\/[0-9a-f]{64}"/g)?.length).toBe(100)
    expect(html.match(/src="data:,"/g)?.length).toBe(20)
  })
})

describe("WARC export", () => {
  it("downloads WARC/1.1 with a request and a response record per stored response, each digest the SHA-256 of its payload", async () => {
    const s = await settled((await request(`${site.origin}/page.html`)).id)
    const r = await fetch(s.warc_url.replace(/^.*\/v1/, t.api), { headers: { authorization: `Bearer ${acct.key}` } })
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toBe("application/warc")
    const bytes = Buffer.from(await r.arrayBuffer())
    const { readWarc } = await import("../support/warcReader.js")
    const records = readWarc(bytes)
    expect(records[0]!.headers["warc-type"]).toBe("warcinfo")
    const responses = records.filter((x) => x.headers["warc-type"] === "response")
    const requests = records.filter((x) => x.headers["warc-type"] === "request")
    expect(responses.length).toBe(1 + s.resources.count)
    expect(requests.length).toBe(responses.length)
    for (const rec of responses) {
      expect(rec.version).toBe("WARC/1.1")
      expect(rec.headers["warc-target-uri"]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//)
      expect(Date.parse(rec.headers["warc-date"]!)).not.toBeNaN()
      const payload = rec.httpBody!
      expect(rec.headers["warc-payload-digest"]).toBe(`sha256:${createHash("sha256").update(payload).digest("hex")}`)
    }
    const page = responses.find((x) => x.headers["warc-target-uri"] === `${site.origin}/page.html`)!
    expect(createHash("sha256").update(page.httpBody!).digest("hex")).toBe(s.sha256)
    expect(page.httpBody!.toString()).toContain('<script src="/js/app.js">')

    // warcio's own reader agrees on every record's type and target.
    const { WARCParser } = await import("warcio")
    const seen: Array<string> = []
    for await (const record of new WARCParser([bytes])) {
      seen.push(`${record.warcType} ${record.warcTargetURI ?? ""}`)
      await record.readFully()
    }
    expect(seen).toEqual(records.map((x) => `${x.headers["warc-type"]} ${x.headers["warc-target-uri"] ?? ""}`))
  })
})
