import { Effect } from "effect"
import { EventLog } from "../../domain/EventLog.js"
import { LinkEvent, Topics } from "../../domain/Events.js"
import { isReservedSlug, type Link } from "../../domain/Link.js"
import { LinkRepo } from "../../domain/ports/LinkRepo.js"
import { prepareLocation } from "./Location.js"

/** What a redirect needs, prepared when the link enters the table, never per request. */
export interface SlugEntry {
  /** The Location header: destination with UTM merged, visible ASCII only. */
  readonly location: string
  readonly linkId: string
  readonly accountId: string
  /** ms since the epoch after which the link answers 404; Infinity when it never expires. */
  readonly expiresAt: number
}

/** A link's whole state, as both the links table and every links.v1 event carry it. */
export interface LinkState {
  readonly id: string
  readonly accountId: string
  readonly slug: string
  readonly destinationUrl: string
  readonly active: boolean
  readonly utm: Readonly<Record<string, string>> | null
  /** ms since the epoch, or null. */
  readonly expiresAt: number | null
  /** ms since the epoch: the version of this state. */
  readonly updatedAt: number
}

/**
 * The redirector's in-memory projection of links.v1: path ("/" + slug) to prepared answer.
 * Every link ever seen keeps its `updatedAt`, disabled ones included, so a late event with
 * an older state (replayed after the database load already had a newer one) changes nothing.
 */
export class SlugTable {
  /** Active links only, keyed by request path. The hot path reads this map and nothing else. */
  readonly byPath = new Map<string, SlugEntry>()
  private readonly versions = new Map<string, { readonly path: string; readonly updatedAt: number }>()
  /** Set once the database load has finished. */
  ready = false

  get size(): number {
    return this.byPath.size
  }

  /** Applies a state unless the table holds a newer one; says whether it applied. */
  apply(state: LinkState): boolean {
    const held = this.versions.get(state.id)
    if (held !== undefined && state.updatedAt < held.updatedAt) return false
    const path = `/${state.slug}`
    if (held !== undefined && held.path !== path) this.removePath(held.path, state.id)
    this.versions.set(state.id, { path, updatedAt: state.updatedAt })
    // Reserved slugs (healthz, readyz, …) are the short host's own paths: never a redirect,
    // even for a row written before its slug was reserved. Checked here, not per request.
    const location =
      state.active && !isReservedSlug(state.slug) ? prepareLocation(state.destinationUrl, state.utm) : null
    if (location === null) {
      this.removePath(path, state.id)
    } else {
      this.byPath.set(path, {
        location,
        linkId: state.id,
        accountId: state.accountId,
        expiresAt: state.expiresAt ?? Number.POSITIVE_INFINITY
      })
    }
    return true
  }

  private removePath(path: string, linkId: string) {
    if (this.byPath.get(path)?.linkId === linkId) this.byPath.delete(path)
  }
}

const parseTime = (iso: string | null): number | null => {
  if (iso === null) return null
  const ms = Date.parse(iso)
  return Number.isNaN(ms) ? null : ms
}

/** The state a links.v1 event carries. */
export const stateOfEvent = (event: LinkEvent): LinkState => ({
  id: event.data.id,
  accountId: event.account_id,
  slug: event.data.slug,
  destinationUrl: event.data.destination_url,
  active: event.data.publication_status === "active",
  utm: event.data.utm,
  expiresAt: parseTime(event.data.expires_at),
  updatedAt: parseTime(event.data.updated_at) ?? 0
})

/** The state of a stored link. Events carry milliseconds: Date has the same precision. */
export const stateOfLink = (link: Link): LinkState => ({
  id: link.id,
  accountId: link.accountId,
  slug: link.slug,
  destinationUrl: link.destinationUrl,
  active: link.status === "active",
  utm: link.utm,
  expiresAt: link.expiresAt === null ? null : link.expiresAt.getTime(),
  updatedAt: link.updatedAt.getTime()
})

/** Rows per FETCH of the load's cursor. */
const LOAD_BATCH = 10_000

/**
 * Every stored link, through one server-side cursor in batches, so memory stays flat while
 * loading (a million links: one batch of rows at a time beside the table).
 */
export const loadLinks = (table: SlugTable) =>
  Effect.flatMap(LinkRepo, (links) => {
    // Each row brings its own copy of its account's id: the table keeps one per account.
    const accounts = new Map<string, string>()
    return links.forEachSnapshot(LOAD_BATCH, (rows) =>
      Effect.sync(() => {
        for (const row of rows) {
          let accountId = accounts.get(row.accountId)
          if (accountId === undefined) {
            accountId = row.accountId
            accounts.set(accountId, accountId)
          }
          table.apply(accountId === row.accountId ? row : { ...row, accountId })
        }
      })
    )
  })

/**
 * Fills the table so that no change is missed: the log's end offsets first, then every link
 * from the database, then the log from those offsets on. A change committed during the load is
 * both in the rows and in the log after the offsets; the version check keeps the newer one.
 * Ready once the load is done; following then runs until the scope closes.
 */
export const startSlugTable = (table: SlugTable) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const offsets = yield* log.endOffsets(Topics.links)
    const started = Date.now()
    const cpu = process.cpuUsage()
    const loaded = yield* loadLinks(table)
    table.ready = true
    const used = process.cpuUsage(cpu)
    const rssMb = Math.round(process.memoryUsage.rss() / 1048576)
    // The CPU time too: on a shared machine the wall time says more about the neighbours.
    yield* Effect.logInfo(
      `slug table loaded: ${loaded} links (${table.size} active) in ${Date.now() - started} ms ` +
        `(cpu ${Math.round((used.user + used.system) / 1000)} ms), rss ${rssMb} MB`
    )
    yield* log.follow({ topic: Topics.links, startAt: { _tag: "Offsets", offsets } }, LinkEvent, (batch) =>
      Effect.sync(() => {
        for (const { event } of batch.events) table.apply(stateOfEvent(event))
      })
    )
  })
