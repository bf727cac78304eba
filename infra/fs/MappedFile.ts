import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** What infra/fs/mapped-file.c exports. */
export interface MappedFiles {
  /** The first `length` bytes of the open file `fd`, allocated on disk and mapped shared: a store is in the page cache at once. Throws when the disk is full or the file cannot be mapped. */
  map(fd: number, length: number): ArrayBuffer
}

let loaded: { readonly addon: MappedFiles | undefined; readonly why: string } | undefined

/**
 * The mapped-file addon, built by scripts/mapped-file.sh (from the working directory: the
 * launchers and the tests run from the repository's root) the first time a process asks; with
 * `why` saying what failed when there is none (no C compiler, no node headers, no such script).
 */
export const mappedFiles = (): { readonly addon: MappedFiles | undefined; readonly why: string } => {
  if (loaded === undefined) loaded = load()
  return loaded
}

const load = () => {
  const script = path.resolve("scripts/mapped-file.sh")
  if (!fs.existsSync(script)) return { addon: undefined, why: `no ${script}` }
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
