import * as csstree from "css-tree"

/** A parsed document whose references can be rewritten once they are fetched. */
export interface Rewritable {
  /** Absolute http(s) URLs it references, without fragment, in order, unique. */
  readonly refs: ReadonlyArray<string>
  /**
   * Serializes it with every reference replaced: `map` gives the new URL of an absolute
   * reference (undefined: not stored, replaced by an empty data: URL); any other URL (not
   * http, https or data) is replaced too. Call once.
   */
  readonly render: (map: (absolute: string) => string | undefined) => string
}

export const EMPTY_URL = "data:,"

/** The absolute http(s) URL a reference leads to from `base`, without its fragment; undefined for data: and the rest. */
export const absoluteRef = (value: string, base: string): string | undefined => {
  const trimmed = value.trim()
  if (trimmed === "" || /^data:/i.test(trimmed)) return undefined
  if (!URL.canParse(trimmed, base)) return undefined
  const url = new URL(trimmed, base)
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined
  url.hash = ""
  return url.href
}

/** What a reference becomes: data: URLs stay, stored ones are mapped, the rest are emptied. */
export const replacement = (value: string, base: string, map: (absolute: string) => string | undefined): string => {
  if (/^\s*data:/i.test(value)) return value.trim()
  const absolute = absoluteRef(value, base)
  return (absolute === undefined ? undefined : map(absolute)) ?? EMPTY_URL
}

/**
 * A stylesheet (`context` "stylesheet") or a style attribute ("declarationList") parsed with
 * css-tree: its `url()` values and `@import` targets (a string or a url()) are the references.
 */
export const processCss = (text: string, base: string, context: "stylesheet" | "declarationList"): Rewritable => {
  const ast = csstree.parse(text, { context, parseValue: true, parseCustomProperty: false, onParseError: () => {} })
  const slots: Array<{ readonly node: { value: string } }> = []
  csstree.walk(ast, (node) => {
    if (node.type === "Url") slots.push({ node })
    else if (node.type === "Atrule" && node.name.toLowerCase() === "import" && node.prelude?.type === "AtrulePrelude") {
      const first = node.prelude.children.first
      if (first?.type === "String") slots.push({ node: first })
    }
  })
  const refs = [...new Set(slots.map((s) => absoluteRef(s.node.value, base)).filter((u) => u !== undefined))]
  return {
    refs,
    render: (map) => {
      for (const slot of slots) slot.node.value = replacement(slot.node.value, base, map)
      return csstree.generate(ast)
    }
  }
}
