import { isIP } from "node:net"
import type { HttpExchange, RawPeer } from "./HttpServer.js"
import { ipText, ipv4Offset, ipv4Text } from "./IpText.js"

/**
 * The reverse proxies whose `X-Forwarded-For` the service believes (TRUSTED_PROXIES): IP
 * addresses and CIDR ranges, IPv4 and IPv6. IPv4 entries also match IPv4-mapped IPv6
 * addresses (`::ffff:10.0.0.1`, node:http's form of an IPv4 peer on a dual-stack socket).
 */
export interface TrustedProxies {
  /** As configured, one entry per address or range; empty: trust nobody. */
  readonly entries: ReadonlyArray<string>
  /** Whether `address` (text form) is one of them. */
  readonly contains: (address: string) => boolean
  /** Whether the IPv4 address with this value (0 to 2^32 - 1) is one of them. */
  readonly containsV4: (value: number) => boolean
}

export const NO_TRUSTED_PROXIES: TrustedProxies = { entries: [], contains: () => false, containsV4: () => false }

/**
 * Dotted IPv4 as a number (0 to 2^32 - 1); -1 for anything else. A loop over the characters,
 * because it runs for every click behind a proxy (node:net's BlockList takes microseconds).
 */
export const ipv4Value = (text: string): number => {
  let value = 0
  let part = 0
  let digits = 0
  let dots = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 46) {
      if (digits === 0 || dots === 3) return -1
      value = value * 256 + part
      part = 0
      digits = 0
      dots++
    } else if (c >= 48 && c <= 57) {
      part = part * 10 + c - 48
      if (++digits > 3 || part > 255) return -1
    } else return -1
  }
  return digits === 0 || dots !== 3 ? -1 : value * 256 + part
}

/** IPv6 text (hex groups, `::`; no embedded IPv4, no zone) as its 8 groups; undefined otherwise. */
export const ipv6Groups = (text: string): Array<number> | undefined => {
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const head = halves[0] === "" ? [] : halves[0]!.split(":")
  const tail = halves.length === 1 || halves[1] === "" ? [] : halves[1]!.split(":")
  const missing = 8 - head.length - tail.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined
  const groups: Array<number> = []
  for (const g of [...head, ...Array<string>(halves.length === 1 ? 0 : missing).fill("0"), ...tail]) {
    if (!/^[0-9A-Fa-f]{1,4}$/.test(g)) return undefined
    groups.push(Number.parseInt(g, 16))
  }
  return groups
}

/** The IPv4 value of an IPv4-mapped IPv6 address (`::ffff:a.b.c.d` or its hex form); -1 otherwise. */
const mappedV4 = (text: string): number => {
  if (!/^::ffff:/i.test(text)) return -1
  const dotted = ipv4Value(text.slice(7))
  if (dotted >= 0) return dotted
  const g = ipv6Groups(text)
  return g !== undefined ? g[6]! * 65536 + g[7]! : -1
}

interface V4Range {
  readonly net: number
  readonly size: number
}
interface V6Range {
  readonly groups: ReadonlyArray<number>
  readonly prefix: number
}

const inV6 = (groups: ReadonlyArray<number>, range: V6Range) => {
  for (let i = 0; i * 16 < range.prefix; i++) {
    const shift = 16 - Math.min(16, range.prefix - i * 16)
    if (groups[i]! >> shift !== range.groups[i]! >> shift) return false
  }
  return true
}

/** `10.0.0.1`, `10.0.0.0/8`, `::1`, `fd00::/8`: undefined when `entry` is none of these. */
const parseEntry = (entry: string): V4Range | V6Range | undefined => {
  const [address = "", prefixText, ...rest] = entry.split("/")
  const v4 = ipv4Value(address)
  const v6 = v4 < 0 && isIP(address) === 6 ? ipv6Groups(address) : undefined
  if ((v4 < 0 && v6 === undefined) || rest.length > 0) return undefined
  const max = v4 >= 0 ? 32 : 128
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : -1
  if (prefix < 0 || prefix > max) return undefined
  if (v6 !== undefined) return { groups: v6, prefix }
  const size = 2 ** (32 - prefix)
  return { net: Math.floor(v4 / size) * size, size }
}

/** The entries of a TRUSTED_PROXIES value (comma-separated, blanks ignored). */
export const trustedProxyEntries = (text: string): ReadonlyArray<string> =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")

/** The first entry that is not an address or CIDR range, if any. */
export const invalidTrustedProxy = (entries: ReadonlyArray<string>): string | undefined =>
  entries.find((e) => parseEntry(e) === undefined)

/** The set of `entries` (each valid: see invalidTrustedProxy). */
export const makeTrustedProxies = (entries: ReadonlyArray<string>): TrustedProxies => {
  if (entries.length === 0) return NO_TRUSTED_PROXIES
  const v4: Array<V4Range> = []
  const v6: Array<V6Range> = []
  for (const entry of entries) {
    const range = parseEntry(entry)
    if (range === undefined) throw new Error(`not an IP address or CIDR range: ${entry}`)
    if ("net" in range) v4.push(range)
    else v6.push(range)
  }
  const containsV4 = (value: number) => {
    for (const r of v4) if (value >= r.net && value < r.net + r.size) return true
    return false
  }
  const contains = (address: string) => {
    const value = ipv4Value(address)
    if (value >= 0) return containsV4(value)
    const mapped = mappedV4(address)
    if (mapped >= 0) return containsV4(mapped)
    if (v6.length === 0) return false
    const groups = ipv6Groups(address)
    return groups !== undefined && v6.some((r) => inV6(groups, r))
  }
  return { entries, contains, containsV4 }
}

/**
 * One `X-Forwarded-For` entry as an address: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`,
 * `[2001:db8::1]` or `[2001:db8::1]:443`. IPv6 comes out in its canonical text (lower case,
 * zeros compressed), IPv4-mapped IPv6 as dotted IPv4, so one visitor has one address
 * whichever way a proxy wrote it. Undefined when the entry is not an address.
 */
export const forwardedAddress = (entry: string): string | undefined => {
  let text = entry.trim()
  if (ipv4Value(text) >= 0) return text
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text)
  if (bracketed) text = bracketed[1]!
  else if (/^[\d.]+:\d{1,5}$/.test(text)) text = text.slice(0, text.indexOf(":"))
  const version = isIP(text)
  if (version === 4) return text
  if (version !== 6) return undefined
  const mapped = mappedV4(text)
  if (mapped >= 0) return `${mapped >>> 24}.${(mapped >>> 16) & 255}.${(mapped >>> 8) & 255}.${mapped & 255}`
  // The URL parser writes IPv6 hosts in RFC 5952 form.
  return URL.canParse(`http://[${text}]/`) ? new URL(`http://[${text}]/`).hostname.slice(1, -1) : undefined
}

/**
 * The client address of a request that reached us from `peer` (the TCP peer) with the header
 * `X-Forwarded-For: forwardedFor` ("" when absent), the standard right-most algorithm:
 * - a peer that is not a trusted proxy is the client; its header, whatever it says, is ignored;
 * - otherwise the entries are walked from the right (each proxy appends the address it saw) and
 *   the first one that is not itself a trusted proxy is the client. Entries to its left were
 *   written by that client (or whoever it talked to) and are never believed;
 * - when every entry is a trusted proxy, the left-most one is the client; a malformed entry
 *   stops the walk at the last trusted address (a proxy, never the text the entry holds).
 */
export const clientAddress = (proxies: TrustedProxies, peer: string, forwardedFor: string): string => {
  if (forwardedFor === "" || !proxies.contains(peer)) return peer
  let client = peer
  let end = forwardedFor.length
  while (end > 0) {
    const start = forwardedFor.lastIndexOf(",", end - 1)
    const address = forwardedAddress(forwardedFor.slice(start + 1, end))
    if (address === undefined) return client
    client = address
    if (!proxies.contains(address)) return client
    end = Math.max(start, 0)
  }
  return client
}

const socketPeer = (ex: HttpExchange) => ex.remoteAddressRaw()

/**
 * How a hot path takes the visitor's address, decided once at start: with no trusted proxy
 * it is the engine's own cheapest form of the TCP peer and nothing else runs per request;
 * with some, the header is read only when the peer is one of them.
 */
export const visitorAddressOf = (proxies: TrustedProxies): ((ex: HttpExchange) => RawPeer) => {
  if (proxies.entries.length === 0) return socketPeer
  return (ex) => {
    const raw = ex.remoteAddressRaw()
    if (typeof raw === "number") {
      // An IPv4 peer as a number (uWebSockets.js with the peer-address library).
      return proxies.containsV4(raw) ? clientAddress(proxies, ipv4Text(raw), ex.header("x-forwarded-for")) : raw
    }
    if (typeof raw === "string") {
      return proxies.contains(raw) ? clientAddress(proxies, raw, ex.header("x-forwarded-for")) : raw
    }
    const bytes = new Uint8Array(raw)
    const o = ipv4Offset(bytes)
    // An IPv4 peer that is no proxy (uWebSockets.js's bytes): as it comes, nothing formatted.
    if (
      o >= 0 &&
      !proxies.containsV4(bytes[o]! * 16777216 + bytes[o + 1]! * 65536 + bytes[o + 2]! * 256 + bytes[o + 3]!)
    ) {
      return raw
    }
    const peer = ipText(bytes)
    return proxies.contains(peer) ? clientAddress(proxies, peer, ex.header("x-forwarded-for")) : peer
  }
}

/** The visitor's address as text (for keys that are not on a hot path). */
export const visitorAddressText = (proxies: TrustedProxies, ex: HttpExchange): string =>
  proxies.entries.length === 0
    ? ex.remoteAddress()
    : clientAddress(proxies, ex.remoteAddress(), ex.header("x-forwarded-for"))
