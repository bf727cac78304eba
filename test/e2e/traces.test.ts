import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { OtlpReceiver, type ReceivedSpan, SpanKind } from "../support/otlpReceiver.js"
import { cli, freePorts, type Ports, Service, serviceEnv } from "../support/service.js"
import { waitFor } from "../support/waitFor.js"

/**
 * Traces of the running service (`npm start`) with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a
 * local OTLP/HTTP receiver: an upload, its conversion and its rating in one trace, no spans
 * for the probes, and the last spans flushed at SIGTERM.
 */
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "shortlinks-traces-e2e-"))
let receiver: OtlpReceiver
let ports: Ports
let env: NodeJS.ProcessEnv
let service: Service

beforeAll(async () => {
  receiver = await OtlpReceiver.start()
  ports = await freePorts()
  env = serviceEnv(dataDir, ports, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })
  service = new Service(env)
  await service.ready()
}, 240_000)

afterAll(async () => {
  await service?.stop()
  await receiver?.close()
  fs.rmSync(dataDir, { recursive: true, force: true })
})

const api = () => `http://127.0.0.1:${ports.api}`

/** Waiting on the service and its exporter (every 5 s): generous, on a busy machine. */
const serviceWait = (what: string) => ({
  timeoutMs: 200_000,
  intervalMs: 200,
  message: () =>
    `${what}\nspans: ${receiver.spans.map((s) => s.name).join(", ")}\n${service.stdout.slice(-3000)}\n${service.stderr}`
})

const png = () =>
  sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 200, g: 80, b: 40 } } })
    .png()
    .toBuffer()

const find = (pred: (s: ReceivedSpan) => boolean) => receiver.spans.find(pred)

describe("traces of the running service (OTLP/HTTP JSON)", { timeout: 240_000 }, () => {
  let key = ""
  let imageId = ""

  it("one trace holds POST /images, the image's conversion and its rating; probes and scrapes start no span", async () => {
    const account = await cli(env, "accounts", "create", "--name", "traces-e2e")
    key = (await cli(env, "keys", "create", "--account", account.id, "--scopes", "images:read,images:write")).key
    for (const p of ["/healthz", "/readyz", "/metrics", "/v1/openapi.json"]) {
      expect((await fetch(`${api()}${p}`)).status).toBe(200)
    }
    const created = await fetch(`${api()}/v1/images`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "idempotency-key": randomUUID(), "content-type": "image/png" },
      body: await png()
    })
    expect(created.status).toBe(202)
    imageId = ((await created.json()) as { data: { id: string } }).data.id

    const rate = await waitFor(
      () => find((s) => s.name === "ImageClassifier.rate" && s.attributes["image.id"] === imageId),
      serviceWait(`the rating span of ${imageId}`)
    )
    const convert = await waitFor(
      () => find((s) => s.name === "ImageConverter.convert" && s.attributes["image.id"] === imageId),
      serviceWait(`the conversion span of ${imageId}`)
    )
    const request = await waitFor(
      () =>
        find(
          (s) =>
            s.kind === SpanKind.server &&
            s.attributes["http.request.method"] === "POST" &&
            s.attributes["url.path"] === "/v1/images"
        ),
      serviceWait("the span of POST /v1/images")
    )
    expect(request.name).toBe("http.server POST")
    expect(request.attributes["http.response.status_code"]).toBe(202)
    expect(request.attributes["http.route"]).toBe("/v1/images")
    expect(request.serviceName).toBe("shortlinks")
    // One trace: the jobs are children of spans of the request's trace.
    expect(convert.traceId).toBe(request.traceId)
    expect(rate.traceId).toBe(request.traceId)
    const inTrace = new Set(receiver.spans.filter((s) => s.traceId === request.traceId).map((s) => s.spanId))
    expect(inTrace.has(convert.parentSpanId!)).toBe(true)
    expect(inTrace.has(rate.parentSpanId!)).toBe(true)
    expect([convert.kind, rate.kind]).toEqual([SpanKind.consumer, SpanKind.consumer])
    // The conversion's own work is inside it (the codec).
    expect(find((s) => s.name === "Codec.convert" && s.traceId === request.traceId)).toBeDefined()

    const paths = receiver.spans.map((s) => s.attributes["url.path"]).filter((p) => p !== undefined)
    for (const probe of ["/healthz", "/readyz", "/metrics", "/v1/openapi.json"]) expect(paths).not.toContain(probe)
    // Traces start only at requests and jobs: the workers' polls and sweeps export nothing.
    const roots = receiver.spans.filter((s) => !s.parentSpanId)
    for (const root of roots) expect([SpanKind.server, SpanKind.consumer, SpanKind.producer]).toContain(root.kind)
    // The API key is never exported (the authorization header is redacted).
    expect(JSON.stringify(receiver.spans)).not.toContain(key)
  })

  it("the spans of a request answered just before SIGTERM are exported when the service stops", async () => {
    const got = await fetch(`${api()}/v1/images/${imageId}`, { headers: { authorization: `Bearer ${key}` } })
    expect(got.status).toBe(200)
    expect(await service.stop()).toBe(0)
    expect(
      find((s) => s.attributes["url.path"] === `/v1/images/${imageId}` && s.attributes["http.request.method"] === "GET")
    ).toBeDefined()
    expect(receiver.others).toEqual([])
  })
})
