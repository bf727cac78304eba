import { isHttpUrl, UTM_KEYS } from "../../domain/Link.js"

const HEX = "0123456789ABCDEF"

/**
 * Percent-encodes every byte outside visible ASCII (0x21–0x7E) of the UTF-8 form: control
 * characters, CR/LF, space, DEL and non-ASCII. What remains can never split or fold a header.
 * Lone surrogates become U+FFFD (what UTF-8 encoding does with them).
 */
export const visibleAscii = (value: string): string => {
  if (!/[^\x21-\x7e]/.test(value)) return value
  const bytes = Buffer.from(value, "utf8")
  let out = ""
  for (const byte of bytes) {
    out += byte >= 0x21 && byte <= 0x7e ? String.fromCharCode(byte) : `%${HEX[byte >> 4]}${HEX[byte & 15]}`
  }
  return out
}

const decodeName = (name: string): string => {
  try {
    return decodeURIComponent(name.replace(/\+/g, " "))
  } catch {
    return name
  }
}

// Lone surrogates become U+FFFD first: encodeURIComponent throws on them.
const encodeValue = (value: string): string =>
  encodeURIComponent(value.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD"))

/**
 * Adds the link's UTM parameters to the destination's query, before any fragment, in the
 * order of UTM_KEYS. A parameter the destination already names (with or without a value,
 * percent-encoded or not) is kept as it is; the rest of the string is left byte for byte.
 */
export const mergeUtm = (destination: string, utm: Readonly<Record<string, string>> | null): string => {
  if (utm === null) return destination
  const hash = destination.indexOf("#")
  const beforeFragment = hash < 0 ? destination : destination.slice(0, hash)
  const fragment = hash < 0 ? "" : destination.slice(hash)
  const question = beforeFragment.indexOf("?")
  const query = question < 0 ? "" : beforeFragment.slice(question + 1)
  const present = new Set(query === "" ? [] : query.split("&").map((pair) => decodeName(pair.split("=", 1)[0]!)))
  let added = ""
  for (const key of UTM_KEYS) {
    const value = utm[key]
    if (value === undefined || present.has(key)) continue
    added += `${added === "" ? "" : "&"}${key}=${encodeValue(value)}`
  }
  if (added === "") return destination
  const separator = question < 0 ? "?" : query === "" || query.endsWith("&") ? "" : "&"
  return `${beforeFragment}${separator}${added}${fragment}`
}

/**
 * An http(s) URL with an ordinary domain name (labels of letters, digits and hyphens, the
 * last one starting with a letter, so never an IPv4 address to check) and visible ASCII
 * after it: one `isHttpUrl` accepts, recognized without the URL parser. A million links load
 * in seconds less; anything else goes through `isHttpUrl`.
 */
export const PLAIN_HTTP_URL = /^https?:\/\/(?:[A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*(?:[/?#][\x21-\x7e]*)?$/

/**
 * The Location header value for a link, computed once when the link enters the slug table:
 * the destination with its UTM parameters, in visible ASCII only. Null when the destination
 * is not an absolute http(s) URL: the API validates it, but the redirector does not send a
 * browser anywhere else.
 */
export const prepareLocation = (destination: string, utm: Readonly<Record<string, string>> | null): string | null => {
  if (PLAIN_HTTP_URL.test(destination)) {
    // Visible ASCII already: without UTM the destination is the answer, as it is (no copy).
    if (utm === null) return destination
  } else if (!isHttpUrl(destination)) {
    return null
  }
  return visibleAscii(mergeUtm(destination, utm))
}
