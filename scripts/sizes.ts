/**
 * The size limits of the code (docs/architecture.md): source files over 350 lines and
 * functions over 120 lines in apps/, infra/ and domain/, largest first. Functions are every
 * function, arrow function, method and accessor the TypeScript parser finds; a function's
 * lines include those of the functions inside it.
 *
 *   node --import tsx scripts/sizes.ts [--files N] [--functions N]
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

const ROOTS = ["apps", "infra", "domain"]
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}
const MAX_FILE = arg("--files", 350)
const MAX_FUNCTION = arg("--functions", 120)

const sources = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return sources(full)
    return entry.name.endsWith(".ts") ? [full] : []
  })

const nameOf = (node: ts.Node, file: ts.SourceFile): string => {
  const named = node as ts.Node & { name?: ts.Node }
  if (named.name !== undefined) return named.name.getText(file)
  const parent = node.parent
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText(file)
  if (ts.isCallExpression(parent)) return `(argument of ${parent.expression.getText(file).slice(0, 40)})`
  return "(anonymous)"
}

const files: Array<{ file: string; lines: number }> = []
const functions: Array<{ file: string; line: number; name: string; lines: number }> = []
for (const file of ROOTS.flatMap(sources)) {
  const text = fs.readFileSync(file, "utf8")
  const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0)
  if (lines > MAX_FILE) files.push({ file, lines })
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line
      if (end - start + 1 > MAX_FUNCTION) {
        functions.push({ file, line: start + 1, name: nameOf(node, source), lines: end - start + 1 })
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
}

console.log(`files over ${MAX_FILE} lines:`)
for (const f of files.sort((a, b) => b.lines - a.lines)) console.log(`  ${f.lines}  ${f.file}`)
console.log(`functions over ${MAX_FUNCTION} lines:`)
for (const f of functions.sort((a, b) => b.lines - a.lines)) console.log(`  ${f.lines}  ${f.file}:${f.line}  ${f.name}`)
