/**
 * Which IP addresses an outbound fetch may connect to. Only ordinary public unicast is
 * allowed; every special-purpose range (IANA IPv4/IPv6 special-purpose registries) that is
 * not meant to be reached from the internet, or that can carry a non-public IPv4 address
 * inside an IPv6 one, is refused.
 *
 * Parsing relies on the WHATWG URL parser (`new URL()`): it turns every spelling of an IPv4
 * literal (2130706433, 0177.0.0.1, 0x7f.1, 127.1, trailing dot, percent-encoded or
 * full-width digits) into dotted decimal and every IPv6 literal into its compressed hex form
 * (`[::ffff:127.0.0.1]` becomes `[::ffff:7f00:1]`), and rejects zone ids. What it cannot parse
 * is not an address and is refused.
 */

export type AddressClass =
  | "public"
  | "not-an-address"
  | "unspecified"
  | "loopback"
  | "private"
  | "shared"
  | "link-local"
  | "multicast"
  | "broadcast"
  | "reserved"
  | "benchmarking"
  | "documentation"
  | "protocol-assignment"
  | "ipv4-mapped"
  | "ipv4-compatible"
  | "nat64"
  | "6to4"
  | "teredo"
  | "unique-local"
  | "site-local"
  | "scoped"

type Bytes = ReadonlyArray<number>

interface Range {
  readonly bytes: Bytes
  readonly bits: number
  readonly kind: AddressClass
}

const parseV4 = (dotted: string): Bytes | undefined => {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(dotted)
  if (m === null) return undefined
  const bytes = m.slice(1).map(Number)
  return bytes.every((b) => b <= 255) ? bytes : undefined
}

/** The 16 bytes of an IPv6 address in the hex-only form the URL serializer writes. */
const parseV6 = (hex: string): Bytes | undefined => {
  const halves = hex.split("::")
  if (halves.length > 2) return undefined
  const groups = (s: string) => (s === "" ? [] : s.split(":"))
  const head = groups(halves[0]!)
  const tail = halves.length === 2 ? groups(halves[1]!) : []
  const fill = 8 - head.length - tail.length
  if ((halves.length === 2 && fill < 1) || (halves.length === 1 && fill !== 0)) return undefined
  const words = [...head, ...Array<string>(fill).fill("0"), ...tail]
  if (!words.every((w) => /^[0-9a-f]{1,4}$/.test(w))) return undefined
  return words.flatMap((w) => {
    const n = Number.parseInt(w, 16)
    return [n >> 8, n & 0xff]
  })
}

const range = (cidr: string, kind: AddressClass): Range => {
  const [addr, bits] = cidr.split("/") as [string, string]
  const bytes = addr.includes(":") ? parseV6(addr) : parseV4(addr)
  if (bytes === undefined) throw new Error(`bad range ${cidr}`)
  return { bytes, bits: Number(bits), kind }
}

const inRange = (bytes: Bytes, r: Range): boolean => {
  if (bytes.length !== r.bytes.length) return false
  for (let bit = 0; bit < r.bits; bit += 8) {
    const take = Math.min(8, r.bits - bit)
    const mask = (0xff << (8 - take)) & 0xff
    const i = bit / 8
    if ((bytes[i]! & mask) !== (r.bytes[i]! & mask)) return false
  }
  return true
}

// Most specific first: the first match names the reason.
const V4_REFUSED: ReadonlyArray<Range> = [
  range("255.255.255.255/32", "broadcast"),
  range("0.0.0.0/8", "unspecified"),
  range("10.0.0.0/8", "private"),
  range("100.64.0.0/10", "shared"),
  range("127.0.0.0/8", "loopback"),
  range("169.254.0.0/16", "link-local"),
  range("172.16.0.0/12", "private"),
  range("192.0.0.0/24", "protocol-assignment"),
  range("192.0.2.0/24", "documentation"),
  range("192.88.99.0/24", "reserved"),
  range("192.168.0.0/16", "private"),
  range("198.18.0.0/15", "benchmarking"),
  range("198.51.100.0/24", "documentation"),
  range("203.0.113.0/24", "documentation"),
  range("224.0.0.0/4", "multicast"),
  range("240.0.0.0/4", "reserved")
]

const NAT64 = range("64:ff9b::/96", "nat64")
const SIX_TO_FOUR = range("2002::/16", "6to4")

const V6_REFUSED: ReadonlyArray<Range> = [
  range("::/128", "unspecified"),
  range("::1/128", "loopback"),
  range("::ffff:0:0/96", "ipv4-mapped"),
  range("::/96", "ipv4-compatible"),
  range("fe80::/10", "link-local"),
  range("fec0::/10", "site-local"),
  range("fc00::/7", "unique-local"),
  range("ff00::/8", "multicast"),
  range("2001::/32", "teredo"),
  range("2001:2::/48", "benchmarking"),
  range("2001:db8::/32", "documentation"),
  range("3fff::/20", "documentation"),
  range("2001::/23", "protocol-assignment")
]

// Global unicast: anything outside it (100::/64 discard, 64:ff9b:1::/48 local NAT64, the
// unassigned space) is not a destination.
const V6_GLOBAL = range("2000::/3", "public")

const classifyV4 = (bytes: Bytes): AddressClass => V4_REFUSED.find((r) => inRange(bytes, r))?.kind ?? "public"

const classifyV6 = (bytes: Bytes): AddressClass => {
  // NAT64 and 6to4 reach the IPv4 address they embed: judge that address.
  if (inRange(bytes, NAT64)) return classifyV4(bytes.slice(12)) === "public" ? "public" : "nat64"
  if (inRange(bytes, SIX_TO_FOUR)) return classifyV4(bytes.slice(2, 6)) === "public" ? "public" : "6to4"
  const refused = V6_REFUSED.find((r) => inRange(bytes, r))
  if (refused !== undefined) return refused.kind
  return inRange(bytes, V6_GLOBAL) ? "public" : "reserved"
}

/** A URL host as the fetcher sees it: a literal address (normalized) or a name to resolve. */
export type UrlHost =
  | { readonly _tag: "Address"; readonly family: 4 | 6; readonly address: string }
  | { readonly _tag: "Name"; readonly name: string }

/**
 * The host of a parsed http(s) URL. The parser has already normalized any literal address:
 * a hostname of four decimal labels is IPv4 (a host whose last label is numeric is parsed
 * as IPv4 or the URL is invalid), a bracketed one is IPv6; anything else is a name.
 */
export const urlHost = (url: URL): UrlHost => {
  const host = url.hostname
  if (host.startsWith("[") && host.endsWith("]")) return { _tag: "Address", family: 6, address: host.slice(1, -1) }
  if (parseV4(host) !== undefined) return { _tag: "Address", family: 4, address: host }
  return { _tag: "Name", name: host }
}

/**
 * What kind of address `ip` is: "public" or the reason it is refused. Accepts the forms a
 * resolver returns and every notation the URL parser accepts for a literal host; an IPv6
 * address with a zone id (`fe80::1%eth0`) is "scoped".
 */
export const classifyAddress = (ip: string): AddressClass => {
  if (ip.includes(":")) {
    if (ip.includes("%")) return "scoped"
    if (!/^[0-9A-Fa-f:.]+$/.test(ip)) return "not-an-address"
    const host = canonicalHost(`[${ip}]`)
    const bytes = host?.startsWith("[") ? parseV6(host.slice(1, -1)) : undefined
    return bytes === undefined ? "not-an-address" : classifyV6(bytes)
  }
  if (!/^[0-9A-Fa-fXx.]+$/.test(ip)) return "not-an-address"
  const host = canonicalHost(ip)
  const bytes = host === undefined ? undefined : parseV4(host)
  return bytes === undefined ? "not-an-address" : classifyV4(bytes)
}

const canonicalHost = (host: string): string | undefined => {
  try {
    return new URL(`http://${host}/`).hostname
  } catch {
    return undefined
  }
}

export const isPublicAddress = (ip: string): boolean => classifyAddress(ip) === "public"
