import { readFileSync } from "node:fs"
import { readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"

/** Whether a process with this pid exists (EPERM: it exists but belongs to another user). */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * A process's anonymous memory in transparent huge pages, in bytes (Linux /proc; this
 * process's by default), or null when it cannot be read. Read once at a start, not polled.
 */
export const hugePagesOf = (pid: number | "self" = "self"): number | null => {
  try {
    const kb = /^AnonHugePages:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "latin1"))?.[1]
    return kb === undefined ? null : Number(kb) * 1024
  } catch {
    return null
  }
}

/** Resident memory of a process in bytes (Linux /proc), or null when it cannot be read. */
export const rssOf = (pid: number): Promise<number | null> =>
  readFile(`/proc/${pid}/status`, "utf8").then(
    (status) => {
      const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1]
      return kb === undefined ? null : Number(kb) * 1024
    },
    () => null
  )

const require = createRequire(import.meta.url)

/**
 * The command line of a worker child process: node with the TypeScript loader running
 * `entry`, under `nice` when `nice` > 0. `nice` goes before exec, so every thread of the
 * child (libuv's, libvips', the WASM runtime's) inherits it.
 */
export const nicedNodeCommand = (entry: string, nice: number, maxOldSpaceMb: number): [string, Array<string>] => {
  const node = [
    process.execPath,
    "--import",
    pathToFileURL(require.resolve("tsx")).href,
    `--max-old-space-size=${maxOldSpaceMb}`,
    entry
  ]
  return nice > 0 && process.platform !== "win32" ? ["nice", ["-n", String(nice), ...node]] : [node[0]!, node.slice(1)]
}
