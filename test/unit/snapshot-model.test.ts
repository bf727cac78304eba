import { describe, expect, it } from "vitest"
import { processCss } from "../../apps/workers/snapshot/Css.js"
import { processHtml } from "../../apps/workers/snapshot/Html.js"
import { parseSrcset } from "../../apps/workers/snapshot/Srcset.js"
import { canCapture, canPublish, isServed, isSnapshotId, snapshotBlobKey } from "../../domain/Snapshot.js"

describe("snapshot state machines", () => {
  it("capture: queued -> capturing -> captured | failed; capturing may go back to queued; the ends are final", () => {
    expect(canCapture("queued", "capturing")).toBe(true)
    expect(canCapture("capturing", "captured")).toBe(true)
    expect(canCapture("capturing", "queued")).toBe(true)
    expect(canCapture("capturing", "failed")).toBe(true)
    expect(canCapture("queued", "captured")).toBe(false)
    expect(canCapture("captured", "capturing")).toBe(false)
    expect(canCapture("failed", "queued")).toBe(false)
  })

  it("publication: unpublished -> published -> withdrawn; withdrawn is final; only captured and published is served", () => {
    expect(canPublish("unpublished", "published")).toBe(true)
    expect(canPublish("published", "withdrawn")).toBe(true)
    expect(canPublish("withdrawn", "published")).toBe(false)
    expect(isServed({ captureStatus: "captured", publicationStatus: "published" })).toBe(true)
    expect(isServed({ captureStatus: "captured", publicationStatus: "withdrawn" })).toBe(false)
    expect(isServed({ captureStatus: "failed", publicationStatus: "unpublished" })).toBe(false)
  })

  it("ids and blob keys: snap_ and base62 only; keys by SHA-256", () => {
    expect(isSnapshotId("snap_abc123")).toBe(true)
    expect(isSnapshotId("snap_../x")).toBe(false)
    expect(isSnapshotId("link_abc")).toBe(false)
    expect(snapshotBlobKey("ab".repeat(32))).toBe(`snapshots/sha256/ab/${"ab".repeat(32)}`)
  })
})

describe("srcset, CSS and HTML references", () => {
  it("parses srcset candidates with descriptors, commas inside URLs and data: URLs", () => {
    expect(parseSrcset("a.png 1x, b.png 2x")).toEqual([
      { url: "a.png", descriptor: "1x" },
      { url: "b.png", descriptor: "2x" }
    ])
    expect(parseSrcset("img,1.png 100w,img,2.png 200w")).toEqual([
      { url: "img,1.png", descriptor: "100w" },
      { url: "img,2.png", descriptor: "200w" }
    ])
    expect(parseSrcset("  x.png  ")).toEqual([{ url: "x.png", descriptor: "" }])
  })

  it("finds url() and @import (string or url) in stylesheets, resolved against the sheet; rewrites them", () => {
    const css = processCss(
      `@import "a.css"; @import url(/b.css); .x { background: url('../i.png') } .y { src: url(data:font/woff2;base64,AA) }`,
      "http://s.test/css/main.css",
      "stylesheet"
    )
    expect(css.refs).toEqual(["http://s.test/css/a.css", "http://s.test/b.css", "http://s.test/i.png"])
    const out = css.render((u) => (u.endsWith("i.png") ? "sha-i" : undefined))
    expect(out).toContain("url(sha-i)")
    expect(out).toContain('@import "data:,"')
    expect(out).toContain("data:font/woff2;base64,AA")
  })

  it("drops scripts, frames, handlers and javascript: URLs; never lists a script as a reference", () => {
    const page = processHtml(
      `<html><head><script src="/s.js"></script><link rel="modulepreload" href="/m.js"></head>
       <body><a href="javascript:alert(1)">x</a><img src="/i.png" onerror="x()"><iframe src="/f"></iframe>
       <object data="/o.swf"></object><form action="http://evil/"><button formaction="/x">b</button></form></body></html>`,
      "http://s.test/"
    )
    expect(page.refs).toEqual(["http://s.test/i.png"])
    const html = page.render(() => "r/x")
    expect(html).not.toMatch(/script|iframe|object|onerror|javascript:|action=/i)
    expect(html).toContain('<img src="r/x">')
  })
})
