import { writeFileSync } from "node:fs"
import { openApiDocumentFor } from "../apps/api/OpenApiDoc.js"

/**
 * Writes the OpenAPI document as the API serves it, for linters and client generators:
 * npx tsx scripts/openapi-doc.ts <file> [PUBLIC_API_BASE] (default http://localhost:8080/v1).
 * .ci/run lints it with Redocly's recommended rules.
 */
const [file, base = "http://localhost:8080/v1"] = process.argv.slice(2)
if (file === undefined) throw new Error("usage: npx tsx scripts/openapi-doc.ts <file> [PUBLIC_API_BASE]")
writeFileSync(file, `${JSON.stringify(openApiDocumentFor(base), null, 2)}\n`)
