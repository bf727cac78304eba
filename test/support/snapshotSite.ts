import * as fs from "node:fs"
import { startTestApi, type TestApiOptions } from "./api.js"
import { png, type Route, send, startCaptureWorker, startOrigin, startSnapshotHost, tempBlobDir } from "./snapshots.js"

const HTML = "text/html; charset=utf-8"
const CSS = "text/css"

/** The page every capture test reads: images, srcset, CSS with url() and @import, a font, an icon, scripts and frames. */
export const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Local test page</title>
<link rel="stylesheet" href="/css/main.css">
<link rel="icon" href="/favicon.png">
<link rel="preload" href="/js/preloaded.js" as="script">
<script src="/js/app.js"></script>
<script>document.title = "scripted"</script>
<style>@import url("/css/inline-import.css"); .hero { background-image: url(/img/hero.png) }</style>
</head>
<body onload="alert(1)" style="background: url('/img/body-bg.png')">
<h1 class="hero">Hello snapshot</h1>
<img src="/img/a.png" alt="a" srcset="/img/a-1x.png 1x, /img/a-2x.png 2x">
<picture><source srcset="/img/pic.png 800w"><img src="/img/pic-fallback.png"></picture>
<img src="/img/missing.png"><img src="/img/broken.png">
<iframe src="/frame.html"></iframe>
<video src="/media/movie.mp4" poster="/img/poster.png"></video>
<a href="https://elsewhere.example/next">next</a>
<img src="/img/slow.png">
</body></html>`

/** The site's routes; `/img/slow.png` answers after `slowMs`. */
export const siteRoutes = async (slowMs: number): Promise<Record<string, Route>> => {
  const slowPng = await png(3)
  const routes: Record<string, Route> = {
    "/page.html": send(HTML, PAGE),
    "/css/main.css": send(
      CSS,
      `@import "imported.css";\n@font-face { font-family: T; src: url("../fonts/t.woff2") format("woff2") }\nbody { background: url(/img/css-bg.png) }`
    ),
    "/css/imported.css": send(CSS, `.deep { background-image: url("/img/deep.png") }`),
    "/css/inline-import.css": send(CSS, `.x { border-image: url(/img/border.png) }`),
    "/fonts/t.woff2": send("font/woff2", Buffer.from("wOF2-fake-font-bytes")),
    "/favicon.png": send("image/png", await png(1)),
    "/js/app.js": send("application/javascript", "window.ran = true"),
    "/js/preloaded.js": send("application/javascript", "window.ran = true"),
    "/frame.html": send(HTML, "<p>frame</p>"),
    "/media/movie.mp4": send("video/mp4", Buffer.alloc(10)),
    "/img/poster.png": send("image/png", await png(2)),
    "/img/broken.png": send("text/plain", "oops", 500),
    "/img/slow.png": async (_req, res) => {
      await new Promise((r) => setTimeout(r, slowMs))
      res.writeHead(200, { "content-type": "image/png" }).end(slowPng)
    },
    "/redirect": (_req, res) => void res.writeHead(302, { location: "/redirect2" }).end(),
    "/redirect2": (_req, res) => void res.writeHead(301, { location: "/page.html" }).end(),
    "/to-private": (_req, res) => void res.writeHead(302, { location: "http://10.1.2.3/inside" }).end(),
    "/to-metadata": (_req, res) => void res.writeHead(302, { location: "http://169.254.169.254/latest/" }).end(),
    "/huge.html": send(HTML, Buffer.alloc(10 * 1024 * 1024 + 1, 0x61)),
    "/slow.html": async (_req, res) => {
      await new Promise((r) => setTimeout(r, 60_000))
      res.writeHead(200, { "content-type": HTML }).end("<p>late</p>")
    },
    "/gone.html": send(HTML, "<p>gone</p>", 404),
    "/broken.html": send(HTML, "<p>error</p>", 500),
    "/many.html": send(
      HTML,
      `<!doctype html><title>many</title>${Array.from({ length: 120 }, (_, i) => `<img src="/many/${i}.png">`).join("")}`
    )
  }
  for (const name of ["hero", "body-bg", "a", "a-1x", "a-2x", "pic", "pic-fallback", "css-bg", "deep", "border"]) {
    routes[`/img/${name}.png`] = send("image/png", await png(name.length * 7 + name.charCodeAt(0)))
  }
  for (let i = 0; i < 120; i++) routes[`/many/${i}.png`] = send("image/png", await png(i + 200))
  return routes
}

export const startSite = async (slowMs = 200) => startOrigin(await siteRoutes(slowMs))

/**
 * Everything a snapshot test runs: the local site, the API (on a fresh database), a capture
 * worker and the snapshot host, sharing one blob directory. `close` stops them all.
 */
export const startSnapshotWorld = async (options: { slowMs?: number; api?: TestApiOptions } = {}) => {
  const blobDir = tempBlobDir()
  const site = await startSite(options.slowMs ?? 200)
  const t = await startTestApi({ ...options.api, blobDir })
  const worker = await startCaptureWorker(t.databaseUrl, blobDir)
  const host = await startSnapshotHost(t.databaseUrl, blobDir)
  return {
    blobDir,
    site,
    t,
    host,
    close: async () => {
      await worker.dispose()
      await host.close()
      await site.close()
      await t.close()
      fs.rmSync(blobDir, { recursive: true, force: true })
    }
  }
}
