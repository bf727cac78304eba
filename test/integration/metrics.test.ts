import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"

/** GET /metrics on the API's port: requests by route and status, in Prometheus' text format. */
let t: TestApi
let acct: TestAccount
beforeAll(async () => {
  t = await startTestApi()
  acct = await t.newAccount()
})
afterAll(() => t?.close())

/** The value of one sample line, or undefined when absent. */
const sample = (text: string, series: string): number | undefined => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

/**
 * What the requests below add to each series. The registry is the process's (Effect's), and
 * the test files share their worker's process (vitest.config.ts), so each series is read as
 * its change over the test.
 */
const ADDED = {
  'http_requests_total{method="POST",route="/v1/links",status="201"}': 1,
  'http_requests_total{method="GET",route="/v1/links/:id",status="200"}': 3,
  'http_requests_total{method="GET",route="/v1/links/:id",status="404"}': 1,
  'http_requests_total{method="GET",route="unmatched",status="404"}': 1,
  'http_request_duration_seconds_count{method="GET",route="/v1/links/:id",status="200"}': 3,
  'http_request_duration_seconds_bucket{method="GET",route="/v1/links/:id",status="200",le="+Inf"}': 3
}

describe("GET /metrics", () => {
  it("counts API requests by method, route template and status, with latency; not health or documents", async () => {
    const before = (await call(`${t.baseUrl}/metrics`)).text
    const created = await call<{ data: { id: string } }>(`${t.api}/links`, {
      method: "POST",
      key: acct.key,
      body: { url: "https://example.com/metrics" },
      headers: { "idempotency-key": "metrics-key-0001" }
    })
    expect(created.status, created.text).toBe(201)
    const id = created.json.data.id
    for (let i = 0; i < 3; i++) expect((await call(`${t.api}/links/${id}`, { key: acct.key })).status).toBe(200)
    expect((await call(`${t.api}/links/link_missing`, { key: acct.key })).status).toBe(404)
    expect((await call(`${t.api}/nothing-here`, { key: acct.key })).status).toBe(404)
    await call(`${t.baseUrl}/healthz`)
    await call(`${t.api}/openapi.json`)

    const r = await call(`${t.baseUrl}/metrics`)
    expect(r.status).toBe(200)
    expect(r.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/)
    const text = r.text
    expect(text).toContain("# TYPE http_requests_total counter")
    expect(text).toContain("# TYPE http_request_duration_seconds histogram")
    // Present after the requests; absent before reads as 0.
    const added = Object.fromEntries(
      Object.keys(ADDED).map((series) => [series, (sample(text, series) ?? Number.NaN) - (sample(before, series) ?? 0)])
    )
    expect(added).toEqual(ADDED)
    // No series for the system routes, and no id in any label.
    expect(text).not.toMatch(/healthz|openapi|metrics"/)
    expect(text).not.toContain(id)
  })
})
