import { Context, type Effect } from "effect"
import type { ProofLookup } from "../Domain.js"

export interface DnsResolverShape {
  /** The TXT records of a name (each record's strings joined), or what went wrong; never fails. */
  readonly txt: (name: string) => Effect.Effect<ProofLookup>
}

/** DNS lookups for domain verification, through the configured resolvers (DNS_SERVERS). */
export class DnsResolver extends Context.Tag("DnsResolver")<DnsResolver, DnsResolverShape>() {}
