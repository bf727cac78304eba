import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

/** tsx's ES module API (`tsx/esm/api`), as a file URL: found from its package, so that it resolves under vitest too. */
const tsxEsmApi = () => {
  const dir = path.dirname(createRequire(import.meta.url).resolve("tsx/package.json"))
  return pathToFileURL(path.join(dir, "dist", "esm", "api", "index.mjs")).href
}

/**
 * The code a worker thread is started with (`new Worker(code, { eval: true })`) to run the
 * module at `entry` (a file URL): the module itself, or, when it is TypeScript, through tsx,
 * which hooks only the main thread on Node 20 (a thread registers it first). A bundle's module
 * is the bundle (scripts/bundle.mjs): the thread then runs the whole bundle, so its entry must
 * not start its app in such a thread.
 */
export const workerBootCode = (entry: string): string =>
  entry.endsWith(".ts")
    ? `import(${JSON.stringify(tsxEsmApi())})` +
      `.then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}) })`
    : `import(${JSON.stringify(entry)})`
