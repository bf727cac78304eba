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
    "Status: the API records these events in its outbox today; the relay that publishes the outbox",
    "to Kafka (or the embedded log) in order is part of the click-path work and not running yet.",
    ""
  ]
  for (const topic of Catalogue) {
    out.push(`## ${topic.topic}`, "", `Key: ${topic.key}. ${topic.description}`, "")
    for (const event of topic.events) {
      const ast = event.ast as SchemaAST.TypeLiteral
      const typeProp = ast.propertySignatures.find((p) => p.name === "type")!
      const type = (typeProp.type as SchemaAST.Literal).literal
      const description = SchemaAST.getDescriptionAnnotation(event.ast)
      out.push(`### \`${String(type)}\``, "")
      if (description._tag === "Some") out.push(description.value, "")
      out.push("```json", JSON.stringify(JSONSchema.make(event as Schema.Schema<any, any, never>), null, 2), "```", "")
    }
  }
  return out.join("\n")
}

if (process.argv.includes("--write")) {
  writeFileSync(new URL("../docs/events.md", import.meta.url), renderEventsDoc())
}
