import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
// @ts-expect-error: a plain ES module of scripts/, no types
import { bundled } from "../../scripts/bundle.mjs"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const name = `test-${randomBytes(4).toString("hex")}`
const dir = path.join(ROOT, ".tmp", name)

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  for (const f of fs.readdirSync(path.join(ROOT, ".build")))
    if (f.startsWith(name)) fs.rmSync(path.join(ROOT, ".build", f))
})

const write = (file: string, text: string, secondsAgo = 0) => {
  fs.writeFileSync(path.join(dir, file), text)
  const t = new Date(Date.now() - secondsAgo * 1000)
  fs.utimesSync(path.join(dir, file), t, t)
}

describe("the bundles apps start from (scripts/bundle.mjs: the redirector's launcher, the CLI)", () => {
  it("is built once, reused while its sources are unchanged, and rebuilt when one of them changes", async () => {
    fs.mkdirSync(dir, { recursive: true })
    write("dep.ts", "export const value: number = 1\n", 60)
    write("entry.ts", 'import { value } from "./dep.js"\nexport default value\n', 60)
    const entry = path.relative(ROOT, path.join(dir, "entry.ts"))
    const load = async (file: string) =>
      ((await import(`${pathToFileURL(file).href}?${randomBytes(4).toString("hex")}`)) as { default: number }).default

    const first: string = await bundled(name, entry)
    expect(first).toBe(path.join(ROOT, ".build", `${name}.mjs`))
    expect(await load(first)).toBe(1)
    const builtAt = fs.statSync(first).mtimeMs
    // Its inputs are the sources it was built from (and the lockfile), not the libraries'.
    const inputs = JSON.parse(fs.readFileSync(path.join(ROOT, ".build", `${name}.inputs.json`), "utf8"))
    expect(inputs).toEqual(expect.arrayContaining([entry, entry.replace("entry.ts", "dep.ts"), "package-lock.json"]))

    expect(await bundled(name, entry)).toBe(first)
    expect(fs.statSync(first).mtimeMs).toBe(builtAt)

    write("dep.ts", "export const value: number = 2\n")
    expect(await bundled(name, entry)).toBe(first)
    expect(fs.statSync(first).mtimeMs).toBeGreaterThan(builtAt)
    expect(await load(first)).toBe(2)
    // Nothing half-written is left beside it.
    expect(
      fs
        .readdirSync(path.join(ROOT, ".build"))
        .filter((f) => f.startsWith(name))
        .sort()
    ).toEqual([`${name}.inputs.json`, `${name}.mjs`])
  }, 60_000)
})
