// The operator CLI, compiled ahead: apps/cli/main.ts bundled by esbuild (scripts/bundle.mjs:
// the TypeScript loader and the unused parts of the libraries cost seconds per call), rebuilt
// when a file it was built from changed. Same commands, same output as
// `node --import tsx apps/cli/main.ts`.
import { pathToFileURL } from "node:url"
import { bundled } from "./bundle.mjs"

await import(pathToFileURL(await bundled("cli", "apps/cli/main.ts", { minify: true })).href)
