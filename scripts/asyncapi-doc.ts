import { writeFileSync } from "node:fs"
import { renderAsyncApi } from "../apps/api/AsyncApiDoc.js"

/**
 * docs/asyncapi.json, the AsyncAPI 3.0 document generated from domain/Events.ts; a test
 * checks that the file matches. Write it with: npx tsx scripts/asyncapi-doc.ts --write
 */
export const renderAsyncApiFile = (): string => `${JSON.stringify(renderAsyncApi(), null, 2)}\n`

if (process.argv.includes("--write")) {
  writeFileSync(new URL("../docs/asyncapi.json", import.meta.url), renderAsyncApiFile())
}
