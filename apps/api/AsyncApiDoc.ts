import { JSONSchema, type Schema, SchemaAST } from "effect"
import { Catalogue } from "../../domain/Events.js"
import { LICENSE } from "./OpenApiDoc.js"

/**
 * The AsyncAPI 3.0 document of the topics, generated from the event schemas of
 * `domain/Events.ts` (the same catalogue as docs/events.md): one channel per topic, one
 * message per event type and version, its payload from `JSONSchema`, its Kafka key. Served at
 * `{base_url}/asyncapi.json` and kept as docs/asyncapi.json (`npx tsx scripts/asyncapi-doc.ts --write`).
 */

const literalOf = (event: Schema.Schema.AnyNoContext, name: string): string | number => {
  const ast = event.ast as SchemaAST.TypeLiteral
  const property = ast.propertySignatures.find((p) => p.name === name)
  const literal = (property?.type as SchemaAST.Literal | undefined)?.literal
  if (typeof literal !== "string" && typeof literal !== "number") {
    throw new Error(`An event schema without a literal ${name}`)
  }
  return literal
}

/** A component key AsyncAPI accepts (letters, digits, `_`, `-`). */
const keyOf = (text: string) => text.replace(/[^A-Za-z0-9_-]/g, "_")

const SCHEMAS = "#/components/schemas/"

export const renderAsyncApi = () => {
  const definitions: Record<string, JSONSchema.JsonSchema7> = {}
  const messages: Record<string, unknown> = {}
  const channels: Record<string, unknown> = {}
  const operations: Record<string, unknown> = {}
  for (const topic of Catalogue) {
    const channel = keyOf(topic.topic)
    const channelMessages: Record<string, unknown> = {}
    for (const event of topic.events as ReadonlyArray<Schema.Schema.AnyNoContext>) {
      const type = String(literalOf(event, "type"))
      const version = Number(literalOf(event, "version"))
      const id = keyOf(`${type}.v${version}`)
      const description = SchemaAST.getDescriptionAnnotation(event.ast)
      messages[id] = {
        name: type,
        title: `${type} (version ${version})`,
        summary: description._tag === "Some" ? description.value : type,
        contentType: "application/json",
        payload: JSONSchema.fromAST(event.ast, { definitions, definitionPath: SCHEMAS }),
        bindings: {
          kafka: { key: { type: "string", description: `The ${topic.key}.` }, bindingVersion: "0.5.0" }
        },
        "x-event-type": type,
        "x-event-version": version
      }
      channelMessages[id] = { $ref: `#/components/messages/${id}` }
    }
    channels[channel] = {
      address: topic.topic,
      title: topic.topic,
      description: `Key: ${topic.key}. ${topic.description} Each topic has 8 partitions; a message the consumers cannot decode goes to \`${topic.topic}.dlq\` unchanged.`,
      messages: channelMessages,
      bindings: { kafka: { topic: topic.topic, partitions: 8, bindingVersion: "0.5.0" } }
    }
    operations[`receive_${channel}`] = {
      action: "receive",
      title: `Consume ${topic.topic}`,
      summary: `Every event of ${topic.topic}, in order per ${topic.key}; delivery is at least once (deduplicate on \`id\`).`,
      channel: { $ref: `#/channels/${channel}` },
      messages: Object.keys(channelMessages).map((id) => ({ $ref: `#/channels/${channel}/messages/${id}` }))
    }
  }
  return {
    asyncapi: "3.0.0",
    info: {
      title: "Link Shortening and Hosted Image Service events",
      version: "1.0.0",
      description:
        "The topics of the service's event log (Apache Kafka when `KAFKA_BROKERS` is set, otherwise the embedded log: same topics, keys and partitions). Every event is JSON with the envelope `{ id, type, version, occurred_at, account_id, data }`; the message key is the entity id (on clicks.v1 the account id). Generated from `domain/Events.ts`; docs/events.md is the same catalogue in prose.",
      // AsyncAPI's license has no SPDX identifier (name and url only).
      license: { name: LICENSE.name }
    },
    defaultContentType: "application/json",
    channels,
    operations,
    components: { schemas: definitions, messages }
  }
}

/** The document, made once. */
export const asyncApiDocument = renderAsyncApi()
