import { Schema } from "effect"
import { AccountId } from "./Account.js"

export const MAX_URL_LENGTH = 2048
export const SLUG_PATTERN = /^[A-Za-z0-9_-]{4,32}$/

/**
 * Paths the short host (and the API host) use for themselves. A slug never shadows them,
 * whatever its case.
 */
export const RESERVED_SLUGS: ReadonlySet<string> = new Set([
  "healthz",
  "readyz",
  "livez",
  "health",
  "ready",
  "metrics",
  "status",
  "openapi",
  "openapi.json",
  "favicon.ico",
  "robots.txt",
  "api",
  "v1",
  "v2",
  "admin",
  "static",
  "assets",
  "_next",
  "www",
  "login",
  "logout",
  "signup",
  "account",
  "settings",
  "docs",
  "help",
  "about",
  "qr",
  "links",
  "images",
  "usage",
  "snapshots",
  "domains",
  "well-known",
  ".well-known"
])

export const isReservedSlug = (slug: string): boolean => RESERVED_SLUGS.has(slug.toLowerCase())

/**
 * An absolute http(s) URL with a host, no credentials-free check: the browser follows it as given.
 * The WHATWG parser repairs `http:host`, `http:///host` and `http:\\host` into URLs with a
 * host, so the authority must also be written out as `//host`.
 */
export const isHttpUrl = (value: string): boolean => {
  if (!URL.canParse(value) || !/^https?:\/\/[^/\\?#]/i.test(value)) return false
  const url = new URL(value)
  return (url.protocol === "http:" || url.protocol === "https:") && url.hostname.length > 0
}

/**
 * Whether a host, as the WHATWG URL parser normalizes it (`url.hostname`), names the machine
 * the browser runs on: `localhost` and its subdomains, 127.0.0.0/8 (the parser turns
 * 2130706433, 0x7f000001, 0177.0.0.1 and 127.1 into dotted form), `[::1]`, the IPv4-mapped
 * `[::ffff:127.x.x.x]` (normalized to `[::ffff:7fxx:xxxx]`), and the unspecified addresses
 * 0.0.0.0, `[::]` and `[::ffff:0:0]`, which connect to the local host on Linux and macOS.
 */
export const isLoopbackHost = (hostname: string): boolean => {
  const host = hostname.toLowerCase().replace(/\.+$/, "")
  return (
    host === "localhost" ||
    host.endsWith(".localhost") ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) ||
    /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(host) ||
    ["[::1]", "0.0.0.0", "[::]", "[::ffff:0:0]"].includes(host)
  )
}

/** The TCP port a URL connects to: its explicit port, else the default of its scheme. */
export const effectivePort = (url: URL): number =>
  url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80

/** The shape of the ids this service issues (`link_` and 22 base62 characters when new); anything else names no link. */
export const LinkId = Schema.String.pipe(Schema.pattern(/^link_[0-9A-Za-z]{1,64}$/), Schema.brand("LinkId"))
export type LinkId = typeof LinkId.Type
export const isLinkId: (id: string) => id is LinkId = Schema.is(LinkId)

/**
 * Whether the string is made of RFC 3986 characters only: unreserved (`A-Z a-z 0-9 - . _ ~`),
 * reserved (`: / ? # [ ] @ ! $ & ' ( ) * + , ; =`) and `%` followed by two hex digits. Anything
 * else (`"`, `<`, `>`, `\`, `^`, `` ` ``, `{`, `|`, `}`, a bare `%`, non-ASCII) must be
 * percent-encoded by the client: the WHATWG parser would otherwise repair or re-encode it, and
 * the link would not lead where the stored string says.
 */
export const isUriCharacters = (value: string): boolean =>
  /^(?:[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$/.test(value)

/**
 * Whether an http(s) URL carries credentials (`user:pass@`, even an empty `@`) in its
 * authority. A link must not: it would hand them to every visitor, and `trusted.example@evil.example`
 * disguises where the link leads.
 */
export const hasUserinfo = (value: string): boolean => /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(value)

const DESTINATION_URL_DESCRIPTION =
  'An absolute http or https URI (RFC 3986), at most 2048 characters, without credentials (`user:password@`). Other characters (for example space, `"`, `<`, `>`, `\\`, `^`, `{`, `|`, `}` and non-ASCII letters) must be percent-encoded, a `%` must start a two-hex-digit escape, and an international host name is written in its `xn--` (punycode) form.'

export const DestinationUrl = Schema.String.pipe(
  Schema.maxLength(MAX_URL_LENGTH, {
    message: () => `must be at most ${MAX_URL_LENGTH} characters`
  }),
  Schema.filter((s) => isHttpUrl(s) || "must be an absolute http or https URI"),
  Schema.filter(
    (s) =>
      !hasUserinfo(s) ||
      "must not contain credentials (user:password@ before the host): every visitor would receive them, and they disguise where the link leads"
  ),
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  Schema.filter((s) => !/[\u0000-\u001f\u007f\s]/.test(s) || "must not contain whitespace or control characters"),
  Schema.filter(
    (s) =>
      isUriCharacters(s) ||
      "must be a URI (RFC 3986): percent-encode other characters (and write non-ASCII host names in their xn-- form)"
  )
).annotations({
  identifier: "DestinationUrl",
  description: DESTINATION_URL_DESCRIPTION,
  jsonSchema: { type: "string", format: "uri", maxLength: MAX_URL_LENGTH, description: DESTINATION_URL_DESCRIPTION }
})

export const CustomSlug = Schema.String.pipe(
  Schema.pattern(SLUG_PATTERN, {
    message: () => "must match ^[A-Za-z0-9_-]{4,32}$"
  })
).annotations({
  identifier: "CustomSlug",
  description: "4 to 32 characters from A-Z, a-z, 0-9, underscore and hyphen.",
  jsonSchema: { type: "string", pattern: "^[A-Za-z0-9_-]{4,32}$", minLength: 4, maxLength: 32 }
})

export const LinkStatus = Schema.Literal("active", "disabled").annotations({ identifier: "LinkStatus" })
export type LinkStatus = typeof LinkStatus.Type

export const MAX_UTM_VALUE_LENGTH = 200
export const UTM_KEYS = ["utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content"] as const

/** One UTM parameter value: non-empty, at most 200 characters. */
export const UtmValue = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(MAX_UTM_VALUE_LENGTH, { message: () => `must be at most ${MAX_UTM_VALUE_LENGTH} characters` })
).annotations({
  identifier: "UtmValue",
  jsonSchema: { type: "string", minLength: 1, maxLength: MAX_UTM_VALUE_LENGTH }
})

export const Utm = Schema.Struct({
  utm_source: Schema.optionalWith(UtmValue, { exact: true }),
  utm_medium: Schema.optionalWith(UtmValue, { exact: true }),
  utm_campaign: Schema.optionalWith(UtmValue, { exact: true }),
  utm_term: Schema.optionalWith(UtmValue, { exact: true }),
  utm_content: Schema.optionalWith(UtmValue, { exact: true })
}).annotations({ identifier: "Utm" })

/** A slug as stored: random ones are 7 base62 characters, custom ones CustomSlug. */
export const Slug = Schema.String.pipe(Schema.pattern(SLUG_PATTERN))

/** A short link: the one model. The API record, the row mapping and the event payload derive from it. */
export class Link extends Schema.Class<Link>("Link")({
  id: LinkId,
  accountId: AccountId,
  slug: Slug,
  /** As stored: new destinations pass DestinationUrl; older ones may hold characters it now refuses. */
  destinationUrl: Schema.String,
  status: LinkStatus,
  utm: Schema.NullOr(Utm),
  expiresAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
}) {}

/** A link with its keyset position (`seq`: insertion order), where paging needs it. */
export class LinkRecord extends Link.extend<LinkRecord>("LinkRecord")({ seq: Schema.BigIntFromSelf }) {}

/** What an insert is given: the database stamps createdAt and updatedAt. */
export type NewLink = Omit<Link, "createdAt" | "updatedAt">

/** The canonical short URL of a link: {short_base}/{slug}. */
export const shortUrl = (shortBase: string, link: Pick<Link, "slug">): string => `${shortBase}/${link.slug}`

export interface LinkSearch {
  readonly afterSeq?: bigint | undefined
  readonly limit: number
  readonly q?: string | undefined
  readonly status?: LinkStatus | undefined
  readonly createdAfter?: Date | undefined
  readonly createdBefore?: Date | undefined
}

/** The filters of a search, without its paging. */
export type LinkFilter = Omit<LinkSearch, "afterSeq" | "limit">
