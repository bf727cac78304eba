import { BlockList, isIP } from "node:net"
import type { HttpExchange } from "./HttpServer.js"
import { ipText } from "./IpText.js"

/**
 * The reverse proxies whose `X-Forwarded-For` the service believes (TRUSTED_PROXIES): IP
 * addresses and CIDR ranges, IPv4 and IPv6. IPv4 entries also match IPv4-mapped IPv6 peers
 * (`::ffff:10.0.0.1`), as node:net's BlockList does.
 */
export interface TrustedProxies {
  /** As configured, one entry per address or range; empty: trust nobody. */
  readonly entries: ReadonlyArray<string>
  /** Whether `address` (text form) is one of them. */
  readonly contains: (address: string) => boolean
}

export const NO_TRUSTED_PROXIES: TrustedProxies = { entries: [], contains: () => false }

/** `10.0.0.1`, `10.0.0.0/8`, `::1`, `fd00::/8`: undefined when `entry` is none of these. */
const parseEntry = (entry: string): { address: string; prefix: number; family: "ipv4" | "ipv6" } | undefined => {
  const [address = "", prefixText, ...rest] = entry.split("/")
  const version = isIP(address)
  if (version === 0 || rest.length > 0) return undefined
  const family = version === 4 ? "ipv4" : "ipv6"
  const max = version === 4 ? 32 : 128
  if (prefixText === undefined) return { address, prefix: max, family }
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) return undefined
  return { address, prefix: Number(prefixText), family }
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
  const list = new BlockList()
  for (const entry of entries) {
    const parsed = parseEntry(entry)
    if (parsed === undefined) throw new Error(`not an IP address or CIDR range: ${entry}`)
    list.addSubnet(parsed.address, parsed.prefix, parsed.family)
  }
  return {
    entries,
    contains: (address) => {
      const version = isIP(address)
      return version !== 0 && list.check(address, version === 4 ? "ipv4" : "ipv6")
    }
  }
}

/**
 * One `X-Forwarded-For` entry as an address: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`,
 * `[2001:db8::1]` or `[2001:db8::1]:443`. IPv6 comes out in its canonical text (lower case,
 * zeros compressed), IPv4-mapped IPv6 as dotted IPv4, so one visitor has one address
 * whichever way a proxy wrote it. Undefined when the entry is not an address.
 */
export const forwardedAddress = (entry: string): string | undefined => {
  let text = entry.trim()
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text)
  if (bracketed) text = bracketed[1]!
  else if (/^[\d.]+:\d{1,5}$/.test(text)) text = text.slice(0, text.indexOf(":"))
  const version = isIP(text)
  if (version === 4) return text
  if (version !== 6) return undefined
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(text)
  if (mapped) return mapped[1]!
  // The URL parser writes IPv6 hosts in RFC 5952 form (and mapped ones in hex: handled above).
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
export const visitorAddressOf = (proxies: TrustedProxies): ((ex: HttpExchange) => ArrayBuffer | string) => {
  if (proxies.entries.length === 0) return socketPeer
  return (ex) => {
    const raw = ex.remoteAddressRaw()
    const peer = typeof raw === "string" ? raw : ipText(new Uint8Array(raw))
    return proxies.contains(peer) ? clientAddress(proxies, peer, ex.header("x-forwarded-for")) : peer
  }
}

/** The visitor's address as text (for keys that are not on a hot path). */
export const visitorAddressText = (proxies: TrustedProxies, ex: HttpExchange): string =>
  proxies.entries.length === 0
    ? ex.remoteAddress()
    : clientAddress(proxies, ex.remoteAddress(), ex.header("x-forwarded-for"))
