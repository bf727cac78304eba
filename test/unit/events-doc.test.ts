import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { renderEventsDoc } from "../../scripts/events-doc.js"

describe("docs/events.md", () => {
  it("is what the event schemas generate (regenerate with: npx tsx scripts/events-doc.ts --write)", () => {
    const file = readFileSync(new URL("../../docs/events.md", import.meta.url), "utf8")
    expect(file).toBe(renderEventsDoc())
  })
})
