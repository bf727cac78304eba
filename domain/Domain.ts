import { domainToASCII } from "node:url"
import { Either, Schema } from "effect"
import { AccountId } from "./Account.js"

/** A custom domain id: `dom_` and base62 characters (infra/Ids.ts issues 22). */
export const DomainId = Schema.String.pipe(Schema.pattern(/^dom_[0-9A-Za-z]{1,64}$/), Schema.brand("DomainId"))
export type DomainId = typeof DomainId.Type
export const isDomainId: (id: string) => id is DomainId = Schema.is(DomainId)

/**
 * pending: registered, its proof not (or no longer) found; verified: the proof was found, the
 * host serves the account's links; disabled: given up by the owner, for good (registering the
 * hostname again makes a new domain with a new token).
 */
export const DomainState = Schema.Literal("pending", "verified", "disabled").annotations({ identifier: "DomainState" })
export type DomainState = typeof DomainState.Type

/** The DNS name under which the TXT proof of `hostname` is published. */
export const CHALLENGE_LABEL = "_shortlinks-challenge"
export const recordName = (hostname: string): string => `${CHALLENGE_LABEL}.${hostname}`

/** A custom domain: the one model. The API record, the row mapping and the event payload derive from it. */
export class Domain extends Schema.Class<Domain>("Domain")({
  id: DomainId,
  accountId: AccountId,
  /** Normalised: lower case, punycode (see `normalizeHostname`). */
  hostname: Schema.String,
  state: DomainState,
  /** The TXT value that proves control, random per registration. */
  token: Schema.String,
  /** What the last check found when it failed ("no TXT record", …); null after a success. */
  lastError: Schema.NullOr(Schema.String),
  lastCheckedAt: Schema.NullOr(Schema.DateFromSelf),
  verifiedAt: Schema.NullOr(Schema.DateFromSelf),
  /** Since when a verified domain's proof has been missing (re-verification); null when found. */
  proofMissingSince: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
}) {}

/** A domain with its keyset position (`seq`: insertion order), where paging needs it. */
export class DomainRecord extends Domain.extend<DomainRecord>("DomainRecord")({ seq: Schema.BigIntFromSelf }) {}

/** What an insert is given: the database stamps createdAt and updatedAt. */
export type NewDomain = Omit<Domain, "createdAt" | "updatedAt">

/** What a check changes. */
export interface DomainChange {
  readonly state: DomainState
  readonly lastError: string | null
  readonly lastCheckedAt: Date | null
  readonly verifiedAt: Date | null
  readonly proofMissingSince: Date | null
}

// --- the hostname policy -------------------------------------------------------------------

/** The rules a hostname must meet, by name (the name is in the 400's detail). */
export type HostnameRule =
  | "not_empty"
  | "no_port"
  | "no_wildcard"
  | "no_trailing_dot"
  | "valid_characters"
  | "no_ip_literal"
  | "at_least_two_labels"
  | "label_length"
  | "total_length"
  | "label_characters"
  | "not_own_host"

export interface HostnameViolation {
  readonly rule: HostnameRule
  readonly message: string
}

const violation = (rule: HostnameRule, message: string) => Either.left<HostnameViolation>({ rule, message })

/** Letters, digits and inner hyphens (RFC 1035 / RFC 1123 labels, after punycode). */
const LDH_LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/
/** The WHATWG URL parser takes a name whose last label is a number as an IPv4 address (127.1, 0x7f.1). */
const NUMERIC_LABEL = /^(?:0x[0-9a-f]*|[0-9]+)$/

/** Whether `host` is `own` or one of its subdomains (both normalised). */
export const isWithinHost = (host: string, own: string): boolean => host === own || host.endsWith(`.${own}`)

/**
 * The hostname as stored and matched: IDN to punycode (node:url domainToASCII), lower case;
 * or the first rule it breaks. `ownHosts` are the service's own host names (lower case, no
 * port): neither they nor their subdomains can be registered.
 */
export const normalizeHostname = (
  input: string,
  ownHosts: ReadonlyArray<string>
): Either.Either<string, HostnameViolation> => {
  const raw = input.trim()
  if (raw === "") return violation("not_empty", "must not be empty")
  if (/[/\\?#@\s]/.test(raw)) {
    return violation("valid_characters", "must be a bare host name (no scheme, path, query, credentials or spaces)")
  }
  if (raw.includes("*")) return violation("no_wildcard", "must not be a wildcard (*)")
  if (raw.startsWith("[") || raw.includes("::")) return violation("no_ip_literal", "must not be an IP address")
  if (raw.includes(":")) return violation("no_port", "must not carry a port (give the host name alone)")
  if (raw.endsWith(".")) return violation("no_trailing_dot", "must not end with a dot")
  // The WHATWG parser takes a name ending in a number as an IPv4 address, or refuses it.
  if (NUMERIC_LABEL.test(raw.toLowerCase().split(".").at(-1)!))
    return violation("no_ip_literal", "must not be an IP address")
  const ascii = domainToASCII(raw.toLowerCase())
  if (ascii === "") return violation("valid_characters", "is not a valid (international) domain name")
  const labels = ascii.split(".")
  if (NUMERIC_LABEL.test(labels.at(-1)!) || /^[0-9.]+$/.test(ascii)) {
    return violation("no_ip_literal", "must not be an IP address")
  }
  if (labels.length < 2) return violation("at_least_two_labels", "must have at least two labels (e.g. go.example.org)")
  if (labels.some((l) => l.length < 1 || l.length > 63)) {
    return violation("label_length", "every label must be 1 to 63 characters (RFC 1035)")
  }
  if (ascii.length > 253) return violation("total_length", "must be at most 253 characters (RFC 1035)")
  if (labels.some((l) => !LDH_LABEL.test(l))) {
    return violation(
      "label_characters",
      "labels may hold only letters, digits and inner hyphens (RFC 1035; international names are converted to xn-- form)"
    )
  }
  // The challenge name must be a valid name too: _shortlinks-challenge. plus the host.
  if (ascii.length + CHALLENGE_LABEL.length + 1 > 253) {
    return violation("total_length", `must be at most ${252 - CHALLENGE_LABEL.length} characters (its proof record)`)
  }
  if (ownHosts.some((own) => isWithinHost(ascii, own))) {
    return violation("not_own_host", "must not be one of this service's own hosts or their subdomains")
  }
  return Either.right(ascii)
}

/** `error.detail` of a hostname refused by the policy: the field, the rule's words and its name. */
export const hostnameDetail = (v: HostnameViolation): string => `hostname: ${v.message} (rule ${v.rule})`

/**
 * A Host header as the redirector matches it: lower case, without the port and a trailing
 * dot. `[v6]:port` keeps its brackets.
 */
export const hostOfHeader = (header: string): string => {
  let host = header
  if (host.startsWith("[")) {
    const end = host.indexOf("]")
    host = end < 0 ? host : host.slice(0, end + 1)
  } else {
    const colon = host.indexOf(":")
    if (colon >= 0) host = host.slice(0, colon)
  }
  if (host.endsWith(".")) host = host.slice(0, -1)
  return host.toLowerCase()
}

// --- the proof -----------------------------------------------------------------------------

/** What a DNS lookup of the proof record found. */
export type ProofLookup =
  | { readonly _tag: "Found"; readonly values: ReadonlyArray<string> }
  | { readonly _tag: "NoRecord" }
  | { readonly _tag: "Timeout" }
  | { readonly _tag: "Failed"; readonly reason: string }

/** The outcome of a proof lookup: null when the token is there, otherwise the `last_error`. */
export const proofError = (lookup: ProofLookup, token: string): string | null => {
  switch (lookup._tag) {
    case "Found":
      return lookup.values.includes(token) ? null : "TXT present but value differs"
    case "NoRecord":
      return "no TXT record"
    case "Timeout":
      return "timeout"
    case "Failed":
      return `DNS lookup failed: ${lookup.reason}`
  }
}
