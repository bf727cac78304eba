import * as fs from "node:fs"
import * as path from "node:path"
import puppeteer, { type Browser } from "puppeteer-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, type TestAccount, type TestApi } from "../support/api.js"
import { expectEnvelope } from "../support/http.js"
import type { Envelope, Snapshot } from "../support/resources.js"
import { startSnapshotWorld } from "../support/snapshotSite.js"
import { waitFor } from "../support/waitFor.js"

const CHROMIUM = "/usr/bin/chromium"
const root = path.resolve(import.meta.dirname, "../..")
const hasChromium = fs.existsSync(CHROMIUM)

describe.skipIf(!hasChromium)(
  `a published snapshot in headless Chromium (skipped when ${CHROMIUM} is not installed)`,
  { timeout: 180_000 },
  () => {
    let world: Awaited<ReturnType<typeof startSnapshotWorld>>
    let t: TestApi
    let acct: TestAccount
    let browser: Browser

    beforeAll(async () => {
      world = await startSnapshotWorld({ slowMs: 50 })
      t = world.t
      acct = await t.newAccount()
      browser = await puppeteer.launch({
        executablePath: CHROMIUM,
        headless: true,
        // puppeteer's default 30 s to start Chromium is short on a busy 2-core machine.
        timeout: 120_000,
        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
      })
    }, 180_000)
    afterAll(async () => {
      await browser?.close()
      await world?.close()
    })

    it("opens with its text, images and styles, makes no request off the snapshot host, runs no script; screenshot saved", async () => {
      const { site, host } = world
      const created = expectEnvelope(
        await call<Envelope<Snapshot>>(`${t.api}/snapshots`, {
          method: "POST",
          key: acct.key,
          body: { url: `${site.origin}/page.html` }
        }),
        202
      )
      const snap = await waitFor(
        async () => {
          const s = expectEnvelope(
            await call<Envelope<Snapshot>>(`${t.api}/snapshots/${created.id}`, { key: acct.key }),
            200
          )
          return s.publication_status === "published" ? s : false
        },
        { timeoutMs: 90_000 }
      )
      const hitsBefore = new Map(site.hits)
      const page = await browser.newPage()
      const requests: Array<string> = []
      const failed: Array<string> = []
      page.on("request", (r) => requests.push(r.url()))
      page.on("requestfailed", (r) => failed.push(`${r.url()} ${r.failure()?.errorText}`))
      const url = `${host.origin}${new URL(snap.snapshot_url).pathname}`
      const response = await page.goto(url, { waitUntil: "networkidle0", timeout: 60_000 })
      expect(response?.status()).toBe(200)

      // Every request stayed on the snapshot host (data: URLs never reach the network).
      const off = requests.filter((r) => !r.startsWith(`${host.origin}/`) && !r.startsWith("data:"))
      expect(off).toEqual([])
      expect(requests.filter((r) => r.includes("/r/")).length).toBeGreaterThan(5)
      // The origin saw nothing from the browser.
      expect(new Map(site.hits)).toEqual(hitsBefore)

      // No script ran: the page's inline script would have changed the title.
      const cdp = await page.createCDPSession()
      const { root: doc } = await cdp.send("DOM.getDocument", { depth: -1 })
      const { outerHTML } = await cdp.send("DOM.getOuterHTML", { nodeId: doc.nodeId })
      expect(outerHTML).toContain("<title>Local test page</title>")
      expect(outerHTML).not.toContain("scripted")
      expect(outerHTML).toContain("Hello snapshot")
      expect(outerHTML).toContain("Snapshot captured")
      const { result } = await cdp.send("Runtime.evaluate", {
        expression: "[document.title, [...document.images].filter((i) => i.naturalWidth > 0).length]",
        returnByValue: true
      })
      // DevTools may evaluate even where the page's own scripts may not: the title is the captured one, and the images decoded.
      expect(result.value[0]).toBe("Local test page")
      // a (srcset), the picture, the slow one; the 404 and the 500 were not stored (data:,).
      expect(result.value[1]).toBe(3)

      // The images decoded (loaded from the snapshot host).
      expect(failed).toEqual([])
      const loaded = requests.filter((r) => r.includes("/r/"))
      expect(loaded.length).toBeGreaterThan(5)

      const out = path.join(root, ".tmp", "snapshot-browser.png")
      fs.mkdirSync(path.dirname(out), { recursive: true })
      await page.screenshot({ path: out as `${string}.png`, fullPage: true })
      expect(fs.statSync(out).size).toBeGreaterThan(1000)
      await page.close()
    })
  }
)
