import { writeFileSync } from "node:fs"
import { JSONSchema, type Schema, SchemaAST } from "effect"
import { Catalogue } from "../domain/Events.js"

/**
 * docs/events.md, generated from the event schemas in domain/Events.ts; the test suite
 * checks that the file matches, so the catalogue cannot drift from the code.
 * Write it with: npx tsx scripts/events-doc.ts --write
 */
export const renderEventsDoc = (): string => {
  const out: Array<string> = [
    "# Event catalogue",
    "",
    "Generated from `domain/Events.ts` by `npx tsx scripts/events-doc.ts --write`; a test fails when it drifts.",
    "",
    "Every event is JSON with the envelope `{ id, type, version, occurred_at, account_id, data }`.",
    "`id` is unique per event: consumers deduplicate on it (delivery is at least once).",
    "The message key is the entity id, so all events of one entity are in order on one partition.",
    "Events are written to a transactional outbox in the same PostgreSQL transaction as the change",
    "they describe, so an acknowledged change always has its event.",
    "",
    "A relay publishes the outbox to the event log in order: Apache Kafka when `KAFKA_BROKERS` is",
    "set, otherwise the embedded log in PostgreSQL (same topics, keys, partitions per key and",
    "at-least-once delivery). Each topic has 8 partitions; a message the consumers cannot decode",
    "goes to the dead-letter topic `<topic>.dlq` with its key and value unchanged.",
    "Clicks are not in the outbox: the redirector publishes them to `clicks.v1` in batches, one per",
    "account per flush, keyed by the account id (so a link's clicks are in order by their times, not by",
    "the partition alone).",
    "",
    "Privacy: click events carry no IP address and no user agent; `visitor` is a keyed hash under a",
    "secret that rotates every day (UTC) and is kept only in PostgreSQL, never with the events or",
    "the analytics tables, and deleted after a day, so visitors cannot be followed across days.",
    ""
  ]
  for (const topic of Catalogue) {
    out.push(`## ${topic.topic}`, "", `Key: ${topic.key}. ${topic.description}`, "")
    for (const event of topic.events) {
      const ast = event.ast as SchemaAST.TypeLiteral
      const typeProp = ast.propertySignatures.find((p) => p.name === "type")!
      const type = (typeProp.type as SchemaAST.Literal).literal
      const versionProp = ast.propertySignatures.find((p) => p.name === "version")!
      const version = (versionProp.type as SchemaAST.Literal).literal
      const description = SchemaAST.getDescriptionAnnotation(event.ast)
      out.push(`### \`${String(type)}\`${version === 1 ? "" : ` (version ${String(version)})`}`, "")
      if (description._tag === "Some") out.push(description.value, "")
      // Any one event schema: `make` cannot infer its type parameters from the union of them all.
      const schema: Schema.Schema.AnyNoContext = event
      out.push("```json", JSON.stringify(JSONSchema.make(schema), null, 2), "```", "")
    }
  }
  return out.join("\n")
}

if (process.argv.includes("--write")) {
  writeFileSync(new URL("../docs/events.md", import.meta.url), renderEventsDoc())
}
