import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

/** One span as an OTLP/HTTP JSON body carries it (the fields the tests read). */
export interface ReceivedSpan {
  readonly serviceName: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string | undefined
  readonly name: string
  readonly kind: number
  readonly attributes: Record<string, unknown>
}

/** OTLP span kinds (the proto's numbers). */
export const SpanKind = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const

interface AnyValue {
  readonly stringValue?: string
  readonly intValue?: number | string
  readonly doubleValue?: number
  readonly boolValue?: boolean
}
const anyValue = (v: AnyValue): unknown =>
  v.stringValue ?? (v.intValue === undefined ? undefined : Number(v.intValue)) ?? v.doubleValue ?? v.boolValue
const attributesOf = (list: ReadonlyArray<{ key: string; value: AnyValue }> = []) =>
  Object.fromEntries(list.map((a) => [a.key, anyValue(a.value)]))

/**
 * A local OTLP/HTTP receiver: records every body POSTed to `/v1/traces` (JSON) and answers
 * 200, as a collector would. Anything else POSTed is recorded under `others`.
 */
export class OtlpReceiver {
  readonly spans: Array<ReceivedSpan> = []
  readonly others: Array<string> = []
  requests = 0
  private constructor(
    private readonly server: Server,
    readonly url: string
  ) {}

  static async start(): Promise<OtlpReceiver> {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const receiver = new OtlpReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    server.on("request", (req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        receiver.requests++
        const body = Buffer.concat(chunks).toString("utf8")
        if (req.method === "POST" && req.url === "/v1/traces") receiver.record(JSON.parse(body))
        else receiver.others.push(`${req.method} ${req.url}`)
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    return receiver
  }

  private record(body: {
    resourceSpans: ReadonlyArray<{
      resource: { attributes: ReadonlyArray<{ key: string; value: AnyValue }> }
      scopeSpans: ReadonlyArray<{
        spans: ReadonlyArray<Omit<ReceivedSpan, "serviceName" | "attributes"> & { attributes: [] }>
      }>
    }>
  }) {
    for (const rs of body.resourceSpans) {
      const serviceName = String(attributesOf(rs.resource.attributes)["service.name"])
      for (const ss of rs.scopeSpans) {
        for (const s of ss.spans) this.spans.push({ ...s, serviceName, attributes: attributesOf(s.attributes) })
      }
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()))
  }
}
