import * as fs from "node:fs"
import puppeteer, { type Browser } from "puppeteer-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, startTestApi, type TestApi } from "../support/api.js"

/** Debian's chromium (installed by .ci/run); the browser test is skipped by name without it. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const hasChromium = fs.existsSync(CHROMIUM)
const SCREENSHOT = new URL("../../.tmp/docs-page.png", import.meta.url)

/** What the page's functions read of the browser's globals (no DOM types in this project). */
interface InPage {
  readonly document: { readonly body: { readonly innerText: string } }
}

let t: TestApi
beforeAll(async () => {
  t = await startTestApi()
})
afterAll(() => t?.close())

describe("GET {base_url}/docs and /asyncapi.json (no key)", () => {
  it("serves the reference page with the document inlined, the script on the same host and a same-host CSP", async () => {
    const r = await call(`${t.api}/docs`)
    expect(r.status, r.text).toBe(200)
    expect(r.headers.get("content-type")).toMatch(/^text\/html/)
    expect(r.headers.get("content-security-policy")).toMatch(/default-src 'self'/)
    expect(r.headers.get("content-security-policy")).toMatch(/connect-src 'self'/)
    expect(r.text).toContain('<script src="/v1/docs/reference.js">')
    expect(r.text).toContain('"hideTestRequestButton":true')
    expect(r.text).toContain('"withDefaultFonts":false')
    expect(r.text).toContain('"hiddenClients":true')
    expect(r.text).not.toMatch(/cdn\.jsdelivr|fonts\.(googleapis|scalar)\.com/)
    const script = await fetch(`${t.api}/docs/reference.js`)
    expect(script.status).toBe(200)
    expect(script.headers.get("content-type")).toMatch(/javascript/)
    expect((await script.text()).length).toBeGreaterThan(1_000_000)
  })

  it("serves the AsyncAPI 3.0 document of the topics", async () => {
    const r = await call<{ asyncapi: string; channels: Record<string, { address: string }> }>(
      `${t.api}/asyncapi.json`,
      {
        headers: { authorization: "Bearer wrong" }
      }
    )
    expect(r.status, r.text).toBe(200)
    expect(r.json.asyncapi).toBe("3.0.0")
    expect(Object.values(r.json.channels).map((c) => c.address)).toEqual(
      expect.arrayContaining(["links.v1", "images.v1", "clicks.v1"])
    )
  })

  it("answers other methods on the documents as any unknown route", async () => {
    const r = await call(`${t.api}/docs`, { method: "POST" })
    expect(r.status).not.toBe(200)
    expect(r.status).toBeLessThan(500)
  })
})

describe.skipIf(!hasChromium)("the reference page in headless Chromium (skipped without chromium)", () => {
  let browser: Browser
  beforeAll(async () => {
    // A busy 2-core machine (the snapshot tests start Chromium too) can take longer than
    // puppeteer's default 30 s to start it: a generous deadline, as test/e2e/snapshot-browser.test.ts has.
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      timeout: 120_000,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
    })
  }, 180_000)
  afterAll(() => browser?.close())

  it("renders the operations and makes no request off its host", { timeout: 120_000 }, async () => {
    const page = await browser.newPage()
    await page.setViewport({ width: 1280, height: 2000 })
    const origin = new URL(t.baseUrl).origin
    const requests: Array<string> = []
    const violations: Array<string> = []
    // Every request the page makes is recorded; one off the host is refused too (as with no internet).
    await page.setRequestInterception(true)
    page.on("request", (request) => {
      const url = request.url()
      requests.push(url)
      if (url.startsWith("data:") || url.startsWith("blob:") || new URL(url).origin === origin) {
        void request.continue()
      } else {
        void request.abort()
      }
    })
    page.on("console", (message) => {
      if (/Content Security Policy/.test(message.text())) violations.push(message.text())
    })
    const response = await page.goto(`${t.api}/docs`, { waitUntil: "networkidle0", timeout: 90_000 })
    expect(response?.status()).toBe(200)
    // Operations by their summaries, from three groups.
    for (const summary of [
      "Create a Short Link",
      "Declare an image's content rating",
      "Read a Short Link's click analytics"
    ]) {
      await page.waitForFunction(
        // biome-ignore lint/performance/useDomNodeTextContent: what is rendered is the point
        (text) => (globalThis as unknown as InPage).document.body.innerText.includes(text),
        { timeout: 60_000 },
        summary
      )
    }
    // biome-ignore lint/performance/useDomNodeTextContent: what is rendered is the point (hidden parts must not count)
    const text = await page.evaluate(() => (globalThis as unknown as InPage).document.body.innerText)
    expect(text).toContain("links")
    expect(text).toMatch(/\/links\/\{id\}|\/links\/:id/)
    // No "try it" / test request button, no client samples, nowhere to type a key.
    expect(text).not.toMatch(/Test Request|Client Libraries|Auth Type/)
    const keyInputs = await page.$$eval("input", (inputs) =>
      inputs.filter((i) => i.offsetParent !== null && (i.type === "password" || /token|key/i.test(i.placeholder)))
    )
    expect(keyInputs).toEqual([])
    fs.mkdirSync(new URL("../../.tmp/", import.meta.url), { recursive: true })
    await page.screenshot({ path: SCREENSHOT.pathname as `${string}.png` })
    const offHost = requests.filter(
      (u) => !u.startsWith("data:") && !u.startsWith("blob:") && new URL(u).origin !== origin
    )
    expect(offHost).toEqual([])
    expect(violations).toEqual([])
    expect(requests.length).toBeGreaterThanOrEqual(2)
    await page.close()
  })
})
