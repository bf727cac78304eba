/**
 * The hosted-image pipeline against bare sharp, and the redirector's share of the machine
 * while conversions run. Driven by bench/images.sh, which starts the service and passes:
 * BENCH_API ({base_url}), BENCH_KEY (images:read,images:write,links:write), BENCH_SHORT
 * ({short_base}), BENCH_DURATION (seconds per wrk phase), BENCH_RUNS (runs per file),
 * BENCH_TMP (a scratch dir).
 *
 * 1. Upload to ready: for a ~10 MiB JPEG, a small PNG and a ~4 MiB animated GIF, the time
 *    from the start of POST /images (raw bytes) until GET /images/{id} says `ready` (polled
 *    every 10 ms, backing off to 2 % of the elapsed time, at most 50 ms), next to a bare `sharp(input).webp(sameSettings).toBuffer()` of the same file in
 *    this process; median of BENCH_RUNS runs, alternating, and the ratio of the medians.
 * 2. Redirect under load: wrk (GET of one short link, capture on) for BENCH_DURATION seconds
 *    with no conversion running, then the same while two conversions of the 10 MiB JPEG are
 *    kept running (a new upload as soon as one is ready), then idle again; the ratio is the
 *    loaded rate over the mean of the two idle ones.
 * Last line: {"jpeg_ratio","png_ratio","gif_ratio","redirect_under_load_ratio"}.
 */
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import os from "node:os"
import * as path from "node:path"
import sharp from "sharp"
import { WEBP_SETTINGS } from "../infra/codec/Pipeline.js"
import { MiB, makeGif, makeJpeg, makePng } from "./fixtures.js"

const env = (name: string) => {
  const v = process.env[name]
  if (v === undefined || v === "") throw new Error(`${name} is required (run bench/images.sh)`)
  return v
}
const API = env("BENCH_API")
const KEY = env("BENCH_KEY")
const SHORT = env("BENCH_SHORT")
const DURATION = Number(process.env.BENCH_DURATION ?? "10")
const RUNS = Number(process.env.BENCH_RUNS ?? "3")
const TMP = env("BENCH_TMP")

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

/** The fields of the API's image resource this bench reads: its size is known once it is ready. */
type Image = { readonly id: string; readonly mime_type: string } & (
  | { readonly status: "ready"; readonly width: number; readonly height: number; readonly bytes: number }
  | { readonly status: "processing" | "failed"; readonly failure: string | null }
)

/** The field of the API's link resource this bench reads. */
interface Link {
  readonly slug: string
}

/** One API call; `D` is the resource the endpoint answers with in `data`. */
const call = async <D>(method: string, p: string, body?: { type: string; bytes: Uint8Array | string }) => {
  const headers: Record<string, string> = { authorization: `Bearer ${KEY}` }
  if (method !== "GET") headers["idempotency-key"] = `bench-${randomUUID()}`
  if (body !== undefined) headers["content-type"] = body.type
  const res = await fetch(`${API}${p}`, { method, headers, ...(body ? { body: body.bytes } : {}) })
  const json = await res.json()
  if (res.status >= 400) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`)
  // A success body is the API's envelope; not validated here, the bench only reads the fields it needs.
  return json as { readonly data: D }
}

/** POST the bytes, poll until ready; the elapsed milliseconds. */
const uploadToReady = async (bytes: Uint8Array, type: string) => {
  const start = performance.now()
  const created = await call<Image>("POST", "/images", { type, bytes })
  const id = created.data.id
  for (;;) {
    const got = await call<Image>("GET", `/images/${id}`)
    if (got.data.status === "ready") return { ms: performance.now() - start, image: got.data }
    if (got.data.status === "failed") throw new Error(`image ${id} failed: ${got.data.failure}`)
    // Every 10 ms at first, then backing off to 2 % of the time so far (at most 50 ms), as a
    // patient client would: a poll costs the API some CPU, which the niced converter gives way to.
    await new Promise((r) => setTimeout(r, Math.min(50, Math.max(10, (performance.now() - start) / 50))))
  }
}

const wrk = (seconds: number, slugPath: string) =>
  new Promise<{ rps: number; p99_ms: number }>((resolve, reject) => {
    const child = spawn("wrk", ["-t1", "-c32", `-d${seconds}s`, "--latency", "-s", "bench/redirect.lua", SHORT], {
      env: { ...process.env, BENCH_PATH: slugPath, BENCH_GET_SECONDS: String(seconds + 3600) }
    })
    let out = ""
    child.stdout.on("data", (c) => (out += c))
    child.stderr.on("data", (c) => (out += c))
    child.on("exit", (code) => {
      const line = out.split("\n").find((l) => l.startsWith("WRK_RESULT "))
      if (code !== 0 || line === undefined) return reject(new Error(`wrk failed: ${out}`))
      const r = JSON.parse(line.slice("WRK_RESULT ".length))
      if (r.non3xx + r.socket_errors > 0) return reject(new Error(`wrk saw errors: ${line}`))
      resolve(r)
    })
  })

const main = async () => {
  const settings = WEBP_SETTINGS.normal
  console.log(
    `images: node ${process.version}, ${os.availableParallelism()} cpus, load ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}; webp quality ${settings.quality} effort ${settings.effort}; median of ${RUNS}`
  )
  const files = [
    { name: "jpeg", type: "image/jpeg", bytes: await makeJpeg(), animated: false },
    { name: "png", type: "image/png", bytes: await makePng(), animated: false },
    { name: "gif", type: "image/gif", bytes: await makeGif(), animated: true }
  ]
  fs.writeFileSync(path.join(TMP, "large.jpg"), files[0]!.bytes)
  const result: Record<string, number> = {}
  for (const file of files) {
    const bare = async () => {
      const start = performance.now()
      await sharp(file.bytes, { animated: file.animated }).webp(settings).toBuffer()
      return performance.now() - start
    }
    await bare()
    const first = await uploadToReady(file.bytes, file.type) // warms the converter process
    const bareMs: Array<number> = []
    const serviceMs: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      bareMs.push(await bare())
      serviceMs.push((await uploadToReady(file.bytes, file.type)).ms)
    }
    const ratio = median(serviceMs) / median(bareMs)
    result[`${file.name}_ratio`] = Number(ratio.toFixed(3))
    const img = first.image
    console.log(
      `${file.name.padEnd(4)} ${(file.bytes.length / MiB).toFixed(2).padStart(6)} MiB -> ${img.mime_type} ` +
        `${img.width}x${img.height} ${(img.bytes / MiB).toFixed(2)} MiB: upload to ready ${median(serviceMs).toFixed(0)} ms ` +
        `(runs ${serviceMs.map((m) => m.toFixed(0)).join(" ")}), bare sharp ${median(bareMs).toFixed(0)} ms, ratio ${ratio.toFixed(3)}`
    )
  }

  const link = await call<Link>("POST", "/links", {
    type: "application/json",
    bytes: JSON.stringify({ url: "https://example.com/bench/images" })
  })
  const slugPath = `/${link.data.slug}`
  await wrk(2, slugPath) // warm-up
  const idle1 = await wrk(DURATION, slugPath)
  let loading = true
  let conversions = 0
  const jpeg = files[0]!.bytes
  const worker = async () => {
    while (loading) {
      await uploadToReady(jpeg, "image/jpeg")
      conversions++
    }
  }
  // Two conversions in the system for the whole window: they start, then wrk starts.
  const workers = [worker(), worker()]
  await new Promise((r) => setTimeout(r, 500))
  const loaded = await wrk(DURATION, slugPath)
  loading = false
  await Promise.all(workers)
  const idle2 = await wrk(DURATION, slugPath)
  const idle = (idle1.rps + idle2.rps) / 2
  const redirectRatio = loaded.rps / idle
  console.log(
    `redirect: idle ${idle1.rps.toFixed(0)} / ${idle2.rps.toFixed(0)} req/s, while converting ${loaded.rps.toFixed(0)} req/s ` +
      `(p99 ${loaded.p99_ms.toFixed(1)} ms; ${conversions} 10 MiB JPEG conversions finished meanwhile), ratio ${redirectRatio.toFixed(3)} (target >= 0.5)`
  )
  console.log(
    `ratios: jpeg ${result.jpeg_ratio} (target <= 1.2), png ${result.png_ratio}, gif ${result.gif_ratio} (target <= 1.3)`
  )
  console.log(
    JSON.stringify({
      jpeg_ratio: result.jpeg_ratio,
      png_ratio: result.png_ratio,
      gif_ratio: result.gif_ratio,
      redirect_under_load_ratio: Number(redirectRatio.toFixed(3))
    })
  )
}

await main()
