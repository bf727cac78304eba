import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Redacted } from "effect"
import pg from "pg"
import { capturePage } from "../apps/workers/snapshot/Capture.js"
import { BlobStore } from "../domain/ports/BlobStore.js"
import { makeFsBlobStore } from "../infra/blobstore/FsBlobStore.js"
import { MigrationsLive } from "../infra/Database.js"
import { safeFetcherLayer } from "../infra/fetcher/SafeFetcher.js"
import { OutboxLive } from "../infra/postgres/Outbox.js"
import { SnapshotReposLive } from "../infra/postgres/Snapshots.js"

/**
 * One capture of a local page with RESOURCES sub-resources (images and stylesheets, 16 KiB
 * each) through the real capture path (SafeFetcher, parse5/css-tree, rewriting, hashing,
 * blob store, PostgreSQL), against the sum of fetching the same page and resources one by
 * one with a bare HTTP client (Node's fetch) in the same run. Median of RUNS runs; prints one
 * JSON line last: {"resources", "capture_ms", "bare_sum_ms", "ratio"}.
 */
const RESOURCES = Number(process.env.BENCH_RESOURCES ?? 50)
const RUNS = Number(process.env.BENCH_RUNS ?? 5)
const serverUrl =
  process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const body = (i: number) => Buffer.concat([Buffer.from(`/* ${i} */`), randomBytes(16 * 1024)])
const files = new Map<string, { type: string; bytes: Buffer }>()
const refs: Array<string> = []
// A tenth are stylesheets, each referencing one more image: RESOURCES in all.
const direct = RESOURCES - Math.floor(RESOURCES / 10)
for (let i = 0; i < direct; i++) {
  const css = i % 9 === 0 && files.size + Math.floor(RESOURCES / 10) <= RESOURCES
  const name = css ? `/s/${i}.css` : `/i/${i}.png`
  files.set(
    name,
    css
      ? { type: "text/css", bytes: Buffer.from(`.c${i}{background:url(/i/x${i}.png)}`) }
      : { type: "image/png", bytes: body(i) }
  )
  refs.push(css ? `<link rel="stylesheet" href="${name}">` : `<img src="${name}">`)
  if (css) files.set(`/i/x${i}.png`, { type: "image/png", bytes: body(1000 + i) })
}
files.set("/page.html", {
  type: "text/html",
  bytes: Buffer.from(`<!doctype html><title>bench</title>${refs.join("")}`)
})

const server = createServer((req, res) => {
  const f = files.get(req.url ?? "")
  if (f === undefined) return void res.writeHead(404).end()
  res.writeHead(200, { "content-type": f.type }).end(f.bytes)
})
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

const admin = new pg.Client({ connectionString: serverUrl })
await admin.connect()
const dbName = `bench_${randomBytes(5).toString("hex")}`
await admin.query(`CREATE DATABASE ${dbName}`)
const dbUrl = new URL(serverUrl)
dbUrl.pathname = `/${dbName}`
const blobRoot = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-bench-snapshots-"))

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
try {
  const captureMs: Array<number> = []
  const bareMs: Array<number> = []
  for (let run = 0; run < RUNS; run++) {
    const blobDir = path.join(blobRoot, String(run))
    const layer = Layer.mergeAll(SnapshotReposLive.pipe(Layer.provide(OutboxLive))).pipe(
      Layer.provideMerge(Layer.succeed(BlobStore, makeFsBlobStore(blobDir))),
      Layer.provideMerge(safeFetcherLayer({ allowLoopback: true })),
      Layer.provideMerge(MigrationsLive.pipe(Layer.provideMerge(PgClient.layer({ url: Redacted.make(dbUrl.href) })))),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
    const runtime = ManagedRuntime.make(layer)
    await runtime.runPromise(Effect.flatMap(PgClient.PgClient, (sql) => sql`TRUNCATE snapshot_blobs`))
    const started = performance.now()
    const result = await runtime.runPromise(capturePage(`${origin}/page.html`))
    captureMs.push(performance.now() - started)
    if (result.resourceCount !== files.size - 1)
      throw new Error(`captured ${result.resourceCount} of ${files.size - 1} resources`)
    await runtime.dispose()

    let sum = 0
    for (const name of ["/page.html", ...[...files.keys()].filter((n) => n !== "/page.html")]) {
      const t0 = performance.now()
      await (await fetch(`${origin}${name}`)).arrayBuffer()
      sum += performance.now() - t0
    }
    bareMs.push(sum)
  }
  const capture = median(captureMs)
  const bare = median(bareMs)
  console.log(`capture of a page with ${files.size - 1} resources: median ${capture.toFixed(1)} ms over ${RUNS} runs`)
  console.log(`bare fetch of the same ${files.size} URLs one by one, summed: median ${bare.toFixed(1)} ms`)
  console.log(
    JSON.stringify({
      resources: files.size - 1,
      capture_ms: Math.round(capture),
      bare_sum_ms: Math.round(bare),
      ratio: Number((capture / bare).toFixed(2))
    })
  )
} finally {
  server.close()
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  await admin.end()
  fs.rmSync(blobRoot, { recursive: true, force: true })
}
