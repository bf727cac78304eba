import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { renderAsyncApi } from "../../apps/api/AsyncApiDoc.js"
import { Catalogue } from "../../domain/Events.js"
import { renderAsyncApiFile } from "../../scripts/asyncapi-doc.js"

interface Message {
  readonly name: string
  readonly payload: { readonly properties: Record<string, { readonly enum?: ReadonlyArray<unknown> }> }
  readonly bindings: { readonly kafka: { readonly key: { readonly type: string; readonly description: string } } }
  readonly "x-event-version": number
}
interface AsyncApiDocument {
  readonly asyncapi: string
  readonly channels: Record<string, { readonly address: string; readonly messages: Record<string, { $ref: string }> }>
  readonly operations: Record<string, { readonly action: string; readonly channel: { readonly $ref: string } }>
  readonly components: { readonly messages: Record<string, Message>; readonly schemas: Record<string, unknown> }
}

describe("docs/asyncapi.json", () => {
  it("is what the event schemas generate (regenerate with: npx tsx scripts/asyncapi-doc.ts --write)", () => {
    const file = readFileSync(new URL("../../docs/asyncapi.json", import.meta.url), "utf8")
    expect(file).toBe(renderAsyncApiFile())
  })

  it("has every topic as a channel with its key, and every event type and version as a message", () => {
    const doc = renderAsyncApi() as unknown as AsyncApiDocument
    expect(doc.asyncapi).toBe("3.0.0")
    const addresses = Object.values(doc.channels).map((c) => c.address)
    expect(addresses).toEqual(Catalogue.map((t) => t.topic))
    for (const topic of Catalogue) {
      const [name, channel] = Object.entries(doc.channels).find(([, c]) => c.address === topic.topic)!
      const messages = Object.values(channel.messages).map((m) => doc.components.messages[m.$ref.split("/").at(-1)!])
      expect(messages).toHaveLength(topic.events.length)
      for (const message of messages) {
        expect(message.bindings.kafka.key.description, topic.topic).toContain(topic.key)
        // The payload's type and version are the literals of the event's schema.
        expect(message.payload.properties.type.enum).toEqual([message.name])
        expect(message.payload.properties.version.enum).toEqual([message["x-event-version"]])
      }
      const operation = Object.values(doc.operations).find((o) => o.channel.$ref === `#/channels/${name}`)
      expect(operation?.action).toBe("receive")
    }
    // Two versions of one type are two messages (clicks.v1 carries three versions).
    const clickVersions = Object.values(doc.components.messages)
      .filter((m) => m.name.startsWith("click"))
      .map((m) => `${m.name}@${m["x-event-version"]}`)
    expect(new Set(clickVersions).size).toBe(clickVersions.length)
    // Every $ref points into the document.
    const text = JSON.stringify(doc)
    for (const [, ref] of text.matchAll(/"\$ref":"([^"]+)"/g)) {
      const target = ref!
        .slice(2)
        .split("/")
        .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], doc)
      expect(target, ref).toBeDefined()
    }
  })
})
