import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** What infra/fs/mapped-file.c exports. */
export interface MappedFiles {
  /**
   * The first `length` bytes of the open file `fd`, allocated on disk and mapped shared: a
   * store is in the page cache at once. Throws when the disk is full or the file cannot be
   * mapped. The mapping outlives the descriptor, and is undone when the buffer is collected.
   */
  map(fd: number, length: number): ArrayBuffer
}

/** The addon, or why there is none. */
type Loaded = { readonly addon: MappedFiles | undefined; readonly why: string }
let loaded: Loaded | undefined

/**
 * The mapped-file addon, built by scripts/mapped-file.sh the first time a process asks; with
 * `why` saying what failed when there is none (no C compiler, no node headers, no such script).
 * The script is looked for in the working directory (the launchers and the tests run from the
 * repository's root), then above this module (its source, or the bundle in .build/).
 */
export const mappedFiles = (): Loaded => {
  if (loaded === undefined) loaded = load()
  return loaded
}

/** scripts/mapped-file.sh of the repository this process runs from. */
const findScript = (): string | undefined => {
  const here = path.dirname(fileURLToPath(import.meta.url))
  for (const root of [process.cwd(), path.resolve(here, ".."), path.resolve(here, "../..")]) {
    const script = path.join(root, "scripts", "mapped-file.sh")
    if (fs.existsSync(script)) return script
  }
  return undefined
}

const load = (): Loaded => {
  const script = findScript()
  if (script === undefined) return { addon: undefined, why: `no scripts/mapped-file.sh in ${process.cwd()}` }
  let file: string
  try {
    file = execFileSync("sh", [script], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim()
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? "").trim()
    return { addon: undefined, why: stderr || String(error) }
  }
  const module = { exports: {} as Partial<MappedFiles> }
  try {
    process.dlopen(module, file, os.constants.dlopen.RTLD_NOW)
  } catch (error) {
    return { addon: undefined, why: `cannot load ${file}: ${String(error)}` }
  }
  const map = module.exports.map
  return typeof map === "function" ? { addon: { map }, why: "" } : { addon: undefined, why: `${file} exports no map` }
}
