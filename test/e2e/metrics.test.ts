import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort } from "../support/ports.js"
import { cli, freePorts, type Ports, Service, serviceEnv } from "../support/service.js"
import { waitFor } from "../support/waitFor.js"

/**
 * `/metrics` on every port of the running service (`npm start`: one process, one registry),
 * counting what the test itself sent: clicks captured, published and projected, conversion
 * and classification, and never health or metrics requests. The workers' own port is checked
 * on a workers process (`npm run start:workers`) beside it.
 */
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-metrics-e2e-"))
let ports: Ports
let service: Service
let env: NodeJS.ProcessEnv
let key = ""

const CHROME =
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"

const wait = (what: string) => ({
  timeoutMs: 200_000,
  intervalMs: 200,
  message: () => `${what}\n${service.stdout.slice(-3000)}\n${service.stderr.slice(-2000)}`
})

beforeAll(async () => {
  ports = await freePorts()
  env = serviceEnv(dataDir, ports, { KAFKA_BROKERS: "", CLICKHOUSE_URL: "", S3_BUCKET: "" })
  service = new Service(env)
  await service.ready()
  const account = await cli(env, "accounts", "create", "--name", "metrics")
  const scopes = "links:read,links:write,images:read,images:write,analytics:read"
  key = (await cli(env, "keys", "create", "--account", account.id, "--scopes", scopes)).key
}, 300_000)

afterAll(async () => {
  await service?.stop()
  fs.rmSync(dataDir, { recursive: true, force: true })
})

const api = (p: string, init: { method?: string; body?: unknown; type?: string } = {}) =>
  fetch(`http://127.0.0.1:${ports.api}/v1${p}`, {
    method: init.method ?? "GET",
    headers: {
      authorization: `Bearer ${key}`,
      ...(init.method === undefined ? {} : { "idempotency-key": randomUUID() }),
      ...(init.body === undefined ? {} : { "content-type": init.type ?? "application/json" })
    },
    ...(init.body === undefined
      ? {}
      : { body: init.type === undefined ? JSON.stringify(init.body) : new Uint8Array(init.body as Buffer) })
  })

const metricsOf = async (port: number) => {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`)
  expect(res.status).toBe(200)
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/)
  return res.text()
}

/** The value of one series (name with its labels as rendered), 0 when absent. */
const sample = (text: string, series: string): number => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

const short = (p: string, method = "GET") =>
  fetch(`http://127.0.0.1:${ports.short}${p}`, { method, redirect: "manual", headers: { "user-agent": CHROME } })

describe("/metrics on every app's port", { timeout: 300_000 }, () => {
  it("a link cannot take the slug `metrics` (a reserved path of every host)", async () => {
    const res = await api("/links", { method: "POST", body: { url: "https://example.com/m", custom_slug: "metrics" } })
    expect(res.status).toBe(409)
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("slug_taken")
    expect((await short("/metrics")).status).toBe(200)
  })

  it("N redirects: captured and published agree with N exactly, projected once the analytics show them; health and /metrics are not counted", async () => {
    const created = await api("/links", { method: "POST", body: { url: "https://example.com/counted" } })
    expect(created.status).toBe(201)
    const link = ((await created.json()) as { data: { id: string; slug: string } }).data
    // Live on the short host within a second: HEAD (a redirect, not a click) until it is.
    await waitFor(async () => (await short(`/${link.slug}`, "HEAD")).status === 302, wait("the link to be live"))
    const before = await metricsOf(ports.short)
    const N = 37
    for (let i = 0; i < N; i++) expect((await short(`/${link.slug}`)).status).toBe(302)
    // Not clicks: HEAD redirects, unknown slugs; not counted at all: health and metrics.
    for (let i = 0; i < 3; i++) expect((await short(`/${link.slug}`, "HEAD")).status).toBe(302)
    expect((await short("/no-such-slug")).status).toBe(404)
    for (const p of ["/healthz", "/readyz", "/metrics"]) expect((await short(p)).status).toBe(200)

    const published = await waitFor(async () => {
      const text = await metricsOf(ports.short)
      return sample(text, "redirector_clicks_published_total") >= N && text
    }, wait("the clicks to be published"))
    expect(sample(published, "redirector_clicks_captured_total")).toBe(N)
    expect(sample(published, "redirector_clicks_published_total")).toBe(N)
    expect(sample(published, "redirector_clicks_spooled_total")).toBe(N)
    expect(sample(published, "redirector_clicks_dropped_total")).toBe(0)
    const answered = (cls: string, text: string) => sample(text, `redirector_responses_total{class="${cls}"}`)
    expect(answered("3xx", published) - answered("3xx", before)).toBe(N + 3)
    expect(answered("4xx", published) - answered("4xx", before)).toBe(1)
    expect(answered("5xx", published)).toBe(0)
    // The other ports serve the same process's registry.
    for (const port of [ports.media, ports.snapshot, ports.api]) {
      expect(sample(await metricsOf(port), "redirector_clicks_captured_total")).toBe(N)
    }

    await waitFor(async () => {
      const res = await api(`/links/${link.id}/analytics`)
      return (
        res.status === 200 && ((await res.json()) as { data: { totals: { clicks: number } } }).data.totals.clicks === N
      )
    }, wait("the analytics to show the clicks"))
    const projected = await metricsOf(ports.short)
    expect(sample(projected, "click_projector_clicks_total")).toBe(N)
    expect(sample(projected, "click_projector_lag_seconds")).toBeGreaterThanOrEqual(0)
    expect(sample(projected, 'outbox_events_relayed_total{topic="links.v1"}')).toBeGreaterThanOrEqual(1)
    expect(projected).toMatch(/^database_pool_connections\{state="idle"\} \d+$/m)
    // The group's lag as its next sweep finds it (every 500 ms at most): nothing left.
    const lag = 'eventlog_consumer_lag_records{group="analytics-projector",topic="clicks.v1"}'
    await waitFor(async () => {
      const text = await metricsOf(ports.short)
      return text.includes(`${lag} `) && sample(text, lag) === 0
    }, wait("the projector's lag to be 0"))
  })

  it("an image upload moves the conversion and classifier metrics", async () => {
    const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 9, g: 99, b: 199 } } })
      .png()
      .toBuffer()
    const res = await api("/images", { method: "POST", body: png, type: "image/png" })
    expect(res.status).toBe(202)
    const id = ((await res.json()) as { data: { id: string } }).data.id
    await waitFor(async () => {
      const image = await api(`/images/${id}`)
      const data = ((await image.json()) as { data: { status: string; rating_source: string | null } }).data
      return data.status !== "processing" && data.rating_source === "classifier"
    }, wait("the image to be converted and rated"))
    const text = await metricsOf(ports.media)
    expect(sample(text, 'image_conversion_duration_seconds_count{outcome="converted"}')).toBe(1)
    expect(sample(text, 'image_classifier_duration_seconds_count{outcome="rated"}')).toBe(1)
    expect(sample(text, 'image_conversion_jobs{state="processing"}')).toBe(0)
    expect(sample(text, 'outbox_events_relayed_total{topic="images.v1"}')).toBeGreaterThanOrEqual(1)
  })

  it("a workers process answers /metrics on WORKERS_PORT", async () => {
    const workersPort = await freePort()
    // As in the distributed mode: the service's PostgreSQL by URL, its own DATA_DIR (its own chDB).
    const pgPort = Number(fs.readFileSync(path.join(dataDir, "postgres", "postmaster.pid"), "utf8").split("\n")[3])
    const password = fs.readFileSync(path.join(dataDir, "postgres.secret"), "utf8").trim()
    const workersDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-metrics-workers-"))
    const workers = spawn(process.execPath, ["--import", "tsx", "apps/workers/main.ts"], {
      cwd: path.resolve(import.meta.dirname, "../.."),
      env: {
        ...env,
        DATA_DIR: workersDir,
        DATABASE_URL: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgPort}/postgres`,
        WORKERS_PORT: String(workersPort)
      }
    })
    let output = ""
    workers.stdout!.on("data", (c) => (output += c))
    workers.stderr!.on("data", (c) => (output += c))
    const exited = new Promise((resolve) => workers.once("exit", resolve))
    try {
      const text = await waitFor(
        async () => {
          if (workers.exitCode !== null) throw new Error(`the workers process exited:\n${output}`)
          const res = await fetch(`http://127.0.0.1:${workersPort}/metrics`).catch(() => undefined)
          const body = res?.status === 200 ? await res.text() : ""
          return body.includes("eventlog_consumer_lag_records{") && body
        },
        { timeoutMs: 200_000, intervalMs: 200, message: () => output.slice(-3000) }
      )
      expect(text).toMatch(/^database_pool_connections\{state="in_use"\} \d+$/m)
      expect(text).toContain("# TYPE eventlog_consumer_lag_records gauge")
      expect((await fetch(`http://127.0.0.1:${workersPort}/healthz`)).status).toBe(200)
    } finally {
      if (workers.exitCode === null) workers.kill("SIGTERM")
      await exited
      fs.rmSync(workersDir, { recursive: true, force: true })
    }
  })
})
