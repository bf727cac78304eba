/** One image candidate of a `srcset`: its URL and its descriptor ("" when none). */
export interface SrcsetCandidate {
  readonly url: string
  readonly descriptor: string
}

const isSpace = (c: string) => c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\f"

/**
 * The candidates of a `srcset` attribute, following the HTML standard's parsing steps
 * (a URL ends at whitespace; trailing commas of a URL separate candidates; a descriptor runs
 * to the next comma outside parentheses).
 */
export const parseSrcset = (value: string): ReadonlyArray<SrcsetCandidate> => {
  const out: Array<SrcsetCandidate> = []
  let i = 0
  while (i < value.length) {
    while (i < value.length && (isSpace(value[i]!) || value[i] === ",")) i++
    if (i >= value.length) break
    let url = ""
    while (i < value.length && !isSpace(value[i]!)) url += value[i++]
    let descriptor = ""
    if (url.endsWith(",")) {
      url = url.replace(/,+$/, "")
    } else {
      let depth = 0
      while (i < value.length) {
        const c = value[i]!
        if (c === "(") depth++
        else if (c === ")") depth = Math.max(0, depth - 1)
        else if (c === "," && depth === 0) break
        descriptor += c
        i++
      }
      i++
    }
    if (url !== "") out.push({ url, descriptor: descriptor.trim() })
  }
  return out
}

export const serializeSrcset = (candidates: ReadonlyArray<SrcsetCandidate>): string =>
  candidates.map((c) => (c.descriptor === "" ? c.url : `${c.url} ${c.descriptor}`)).join(", ")
