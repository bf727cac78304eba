import { Context, Effect, Layer } from "effect"
import { hostOfHeader } from "../../domain/Domain.js"
import { DomainEvent } from "../../domain/DomainEvents.js"
import { EventLog } from "../../domain/EventLog.js"
import { Topics } from "../../domain/Events.js"
import { isLoopbackHost } from "../../domain/Link.js"
import { DomainRepo } from "../../domain/ports/DomainRepo.js"
import type { HttpExchange } from "../../infra/http/HttpServer.js"
import type { SlugTable } from "./SlugTable.js"

/** A custom domain's state as the host table keeps it (from the domains table or a domains.v1 event). */
export interface HostState {
  readonly id: string
  readonly accountId: string
  readonly hostname: string
  readonly verified: boolean
  /** ms since the epoch: the version of this state. */
  readonly updatedAt: number
}

/**
 * The redirector's second in-memory projection: verified custom host -> the account that
 * verified it, following domains.v1 like the slug table follows links.v1. Every domain seen
 * keeps its `updatedAt`, so a late older event changes nothing; a host is removed only by
 * the domain that holds it (another account may hold it since).
 */
export class HostTable {
  /** Verified hosts only (lower case, punycode) -> the owning account. */
  readonly byHost = new Map<string, { readonly domainId: string; readonly accountId: string }>()
  private readonly versions = new Map<string, { readonly hostname: string; readonly updatedAt: number }>()
  ready = false

  get size(): number {
    return this.byHost.size
  }

  apply(state: HostState): boolean {
    const held = this.versions.get(state.id)
    if (held !== undefined && state.updatedAt < held.updatedAt) return false
    this.versions.set(state.id, { hostname: state.hostname, updatedAt: state.updatedAt })
    if (state.verified) {
      this.byHost.set(state.hostname, { domainId: state.id, accountId: state.accountId })
    } else if (this.byHost.get(state.hostname)?.domainId === state.id) {
      this.byHost.delete(state.hostname)
    }
    return true
  }

  /** The account that serves its links on `hostname`, if it is verified. */
  accountOf(hostname: string): string | undefined {
    return this.byHost.get(hostname)?.accountId
  }
}

export const stateOfEvent = (event: DomainEvent): HostState => ({
  id: event.data.id,
  accountId: event.account_id,
  hostname: event.data.hostname,
  verified: event.data.state === "verified",
  updatedAt: Date.parse(event.data.updated_at) || 0
})

/**
 * Fills the table without missing a change (as the slug table does): the log's end offsets,
 * then the verified domains from the database, then the log from those offsets on.
 */
export const startHostTable = (table: HostTable) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const repo = yield* DomainRepo
    const offsets = yield* log.endOffsets(Topics.domains)
    const rows = yield* repo.allVerified
    for (const r of rows) {
      table.apply({
        id: r.id,
        accountId: r.accountId,
        hostname: r.hostname,
        verified: true,
        updatedAt: r.updatedAt.getTime()
      })
    }
    table.ready = true
    yield* Effect.logInfo(`host table loaded: ${table.size} verified custom domains`)
    yield* log.follow({ topic: Topics.domains, startAt: { _tag: "Offsets", offsets } }, DomainEvent, (batch) =>
      Effect.sync(() => {
        for (const { event } of batch.events) table.apply(stateOfEvent(event))
      })
    )
  })

/** The verified hosts the redirector serves, loaded and followed for as long as its scope lives. */
export class VerifiedHosts extends Context.Tag("VerifiedHosts")<VerifiedHosts, HostTable>() {}

/** Needs DomainRepo and the EventLog. */
export const VerifiedHostsLive = Layer.scoped(
  VerifiedHosts,
  Effect.gen(function* () {
    const table = new HostTable()
    yield* startHostTable(table)
    return table
  })
)

/** The on-demand TLS ask of a proxy such as Caddy: `GET /.well-known/tls-ask?domain=HOST`. */
export const TLS_ASK_PATH = "/.well-known/tls-ask"

const TEXT = "text/plain; charset=utf-8"
const HTML = "text/html; charset=utf-8"
const NO_STORE = "private, no-store"

/** The `domain` query parameter, decoded; "" when absent or malformed. */
const domainParam = (query: string): string => {
  for (const part of query.split("&")) {
    if (!part.startsWith("domain=")) continue
    try {
      return decodeURIComponent(part.slice(7).replace(/\+/g, " "))
    } catch {
      return ""
    }
  }
  return ""
}

/** 200 only for a verified custom host (from memory), 404 otherwise: certificates only for those. */
export const answerTlsAsk = (ex: HttpExchange, hosts: HostTable) => {
  const domain = hostOfHeader(domainParam(ex.query()))
  const ok = domain !== "" && hosts.accountOf(domain) !== undefined
  ex.writeStatus(ok ? 200 : 404)
    .writeHeader("Content-Type", TEXT)
    .writeHeader("Cache-Control", "no-store")
    .end(ok ? "ok\n" : "not a verified domain\n")
}

export interface HostRouting {
  readonly hosts: HostTable
  /**
   * Answers the request if the Host rules refuse it (an unknown host, a slug of another
   * account or none on a custom host) and says so; false leaves it to the canonical path,
   * which then serves it as on the canonical host (slugs are unique across accounts, so the
   * entry it finds is the one checked here).
   */
  readonly divert: (ex: HttpExchange) => boolean
}

/**
 * The redirector's routing by Host. The canonical short host costs one header read and one
 * string comparison (with the last canonical spelling seen); only another Host is parsed:
 * the canonical host's name (any port), loopback names and addresses (health checks, a local
 * proxy) and a missing Host are canonical; a verified custom host serves the active links of
 * its account only (404 with `X-Robots-Tag: noindex` for any other slug, and for its bare
 * root); any other host gets the 404 page, except for the health, metrics and TLS-ask paths
 * (a scraper or a proxy may ask by address).
 */
export const makeHostRouting = (
  hosts: HostTable,
  slugs: SlugTable,
  shortBase: string,
  notFoundPage: string
): HostRouting => {
  const canonicalHeader = new URL(shortBase).host
  const canonicalName = hostOfHeader(canonicalHeader)
  let lastCanonical = canonicalHeader
  const notFound = (ex: HttpExchange, noindex: boolean) => {
    ex.writeStatus(404).writeHeader("Content-Type", HTML).writeHeader("Cache-Control", NO_STORE)
    if (noindex) ex.writeHeader("X-Robots-Tag", "noindex")
    ex.writeHeader("X-Content-Type-Options", "nosniff").end(notFoundPage)
    return true
  }
  const isCanonical = (name: string) => name === "" || name === canonicalName || isLoopbackHost(name)
  // The last other Host header and its name: a custom domain's requests come in runs too.
  let lastOther: string | undefined
  let lastOtherName = ""
  const divert = (ex: HttpExchange): boolean => {
    const header = ex.header("host")
    if (header === lastCanonical) return false
    let name = lastOtherName
    if (header !== lastOther) {
      name = hostOfHeader(header)
      if (isCanonical(name)) {
        lastCanonical = header
        return false
      }
      lastOther = header
      lastOtherName = name
    }
    const path = ex.path
    const accountId = hosts.accountOf(name)
    if (accountId === undefined) {
      return path === "/healthz" || path === "/readyz" || path === "/metrics" || path === TLS_ASK_PATH
        ? false
        : notFound(ex, false)
    }
    if (ex.method !== "GET" && ex.method !== "HEAD") return false
    const row = slugs.rowOf(path)
    return row < 0 || slugs.accountId(row) !== accountId ? notFound(ex, true) : false
  }
  return { hosts, divert }
}
