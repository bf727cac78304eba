import { Clock, Effect, Either, Option, type Stream } from "effect"
import type { Principal } from "../../../domain/Account.js"
import { LinkDisabled, NotFound, QuotaExceeded, SlugTaken, UrlNotAllowed } from "../../../domain/Errors.js"
import { type LinkEvent, Topics } from "../../../domain/Events.js"
import {
  effectivePort,
  isLinkId,
  isLoopbackHost,
  isReservedSlug,
  type Link,
  type LinkFilter,
  LinkId,
  type LinkSearch,
  shortUrl
} from "../../../domain/Link.js"
import { LinkEventPayload } from "../../../domain/LinkEventPayload.js"
import {
  expiryCeiling,
  expiryWithinPlan,
  linkQuota,
  type PlanLimits,
  quotaDetail,
  usagePeriod
} from "../../../domain/Plan.js"
import { type LinkOptionsChange, LinkRepo, type LinkRepoShape } from "../../../domain/ports/LinkRepo.js"
import { Outbox, type OutboxShape } from "../../../domain/ports/Outbox.js"
import { UsageRepo } from "../../../domain/ports/UsageRepo.js"
import { AppConfig, type AppConfigShape } from "../../../infra/AppConfig.js"
import { firstFree, newId, newSlug } from "../../../infra/Ids.js"
import { Plans } from "../../../infra/Plans.js"

/** What a new link is made of. */
export interface CreateLinkInput {
  readonly url: string
  /** The slug the caller asks for; a random free one when absent. */
  readonly customSlug?: string | undefined
}

/** host[:port], lower case, without the trailing dot a fully qualified name may carry. */
const hostKey = (url: URL) => {
  const name = url.hostname.toLowerCase().replace(/\.+$/, "")
  return url.port === "" ? name : `${name}:${url.port}`
}

/** Appends the link event of the change: its data is the link after it, encoded by LinkEventPayload. */
const appendLinkEvent = (outbox: OutboxShape, type: LinkEvent["type"], link: Link) =>
  outbox.appendEvent(LinkEventPayload, Topics.links, link.id, type, link.accountId, link)

/** This service's own hosts and ports, which a destination may not point back at. */
interface OwnTargets {
  readonly hosts: ReadonlySet<string>
  readonly ports: ReadonlySet<number>
}

const ownTargets = (config: AppConfigShape): OwnTargets => {
  const bases = [config.shortBase, config.apiBase, config.imageHost].map((u) => new URL(u))
  return { hosts: new Set(bases.map(hostKey)), ports: new Set(bases.map(effectivePort)) }
}

/**
 * Destinations may not point back at this service: a short link to a short link loops.
 * That is one of its configured hosts, or a loopback name or address (in any notation the
 * URL parser normalizes) on one of its ports. Other private addresses are fine: links are
 * followed by browsers, never fetched by the server.
 */
const checkDestination = (own: OwnTargets, destination: string): Effect.Effect<void, UrlNotAllowed> => {
  const url = new URL(destination)
  if (own.hosts.has(hostKey(url))) {
    return new UrlNotAllowed({
      message: "The destination is one of this service's own hosts.",
      reason: "url: must not point to this service"
    })
  }
  if (isLoopbackHost(url.hostname) && own.ports.has(effectivePort(url))) {
    return new UrlNotAllowed({
      message: "The destination is a loopback address on one of this service's ports.",
      reason: "url: must not point to this service (a loopback host on one of its ports)"
    })
  }
  return Effect.void
}

/** A custom slug may not shadow a path the hosts use for themselves (RESERVED_SLUGS, any case). */
const checkCustomSlug = (slug: string | undefined): Effect.Effect<void, SlugTaken> =>
  slug !== undefined && isReservedSlug(slug)
    ? new SlugTaken({ message: "That slug is reserved.", detail: `custom_slug: '${slug}' is reserved` })
    : Effect.void

/**
 * An expires_at further ahead than the plan's link_expiry_max_days is QuotaExceeded (a numeric
 * plan limit, like the other quotas). Unmetered Partner Keys skip the ceiling.
 */
const checkExpiryCeiling = (plan: PlanLimits, principal: Principal, expiresAt: Date) =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    if (expiryWithinPlan(plan, principal.unmetered, expiresAt.getTime(), now)) return
    const ceiling = expiryCeiling(plan, principal.unmetered, now) ?? now
    return yield* new QuotaExceeded({
      message: `expires_at is further ahead than the plan allows (plan ${principal.plan}).`,
      detail: `link_expiry_max_days: ${plan.link_expiry_max_days} (expires_at may be at most ${new Date(ceiling).toISOString()})`
    })
  })

/**
 * The caller's link, or NotFound (another account's link is NotFound too). An id of another
 * shape names no link and must not reach SQL: PostgreSQL refuses NUL bytes.
 */
const owned = (links: LinkRepoShape, principal: Principal, id: string, forUpdate = false) =>
  Effect.gen(function* () {
    const link = !isLinkId(id)
      ? Option.none()
      : yield* forUpdate ? links.findForUpdate(principal.accountId, id) : links.find(principal.accountId, id)
    if (Option.isNone(link)) return yield* new NotFound({ message: "No such link." })
    return link.value
  })

/** The caller's link, locked for the transaction, if it may still change: a disabled link may not. */
const changeable = (links: LinkRepoShape, principal: Principal, id: string) =>
  Effect.flatMap(owned(links, principal, id, true), (link) =>
    link.status === "disabled"
      ? Effect.fail(new LinkDisabled({ message: "A disabled link cannot be changed." }))
      : Effect.succeed(link)
  )

/** Inserts the link under its custom slug (SlugTaken when in use) or a random free one; appends link.created. */
const insertLink = (links: LinkRepoShape, outbox: OutboxShape, principal: Principal, input: CreateLinkInput) =>
  Effect.gen(function* () {
    const base = {
      id: LinkId.make(newId("link")),
      accountId: principal.accountId,
      destinationUrl: input.url,
      status: "active" as const,
      utm: null,
      expiresAt: null
    }
    let link: Link
    if (input.customSlug !== undefined) {
      const inserted = yield* links.insert({ ...base, slug: input.customSlug })
      if (Option.isNone(inserted)) {
        return yield* new SlugTaken({
          message: "That slug is already in use.",
          detail: `custom_slug: '${input.customSlug}' is taken`
        })
      }
      link = inserted.value
    } else {
      // 62^7 slugs: a collision is rare, and each attempt draws a fresh random one.
      link = yield* firstFree(
        Effect.suspend(() => {
          const slug = newSlug()
          return isReservedSlug(slug) ? Effect.succeedNone : links.insert({ ...base, slug })
        }),
        "slug"
      )
    }
    yield* appendLinkEvent(outbox, "link.created", link)
    return link
  })

/**
 * Short links: the use cases the API, the CLI and tests share. Failures are the domain's
 * (domain/Errors.ts); results are the model (domain/Link.ts), with `seq` where a page needs it.
 *
 * No method opens a transaction. A write (create, update, disable, updateOptions) runs in the
 * caller's: the API's IdempotentOperations opens one around every POST, PATCH and DELETE; any
 * other caller wraps the call in `Transactions.withTransaction`, so that the change, its usage
 * count and its outbox event commit together.
 */
export class Links extends Effect.Service<Links>()("Links", {
  effect: Effect.gen(function* () {
    const links = yield* LinkRepo
    const outbox = yield* Outbox
    const usage = yield* UsageRepo
    const plans = yield* Plans
    const config = yield* AppConfig
    const own = ownTargets(config)

    /**
     * Links per month: the link is counted in the caller's transaction, or the quota refuses it
     * and the insert (with its event) is undone. Unmetered Partner Keys skip the limit but are
     * still counted.
     */
    const withinLinkQuota = <A, E, R>(principal: Principal, insert: Effect.Effect<A, E, R>) =>
      Effect.gen(function* () {
        const period = usagePeriod(new Date(yield* Clock.currentTimeMillis))
        const limit = linkQuota(plans.limits(principal.plan), principal.unmetered)
        const created = yield* usage.counted(principal.accountId, period, "links", limit, insert)
        if (Either.isRight(created)) return created.right
        return yield* new QuotaExceeded({
          message: `The plan's monthly link quota is used up (plan ${principal.plan}, ${period} UTC).`,
          detail: quotaDetail("links_per_month", created.left, limit ?? 0)
        })
      })

    const create = Effect.fn("Links.create")(function* (principal: Principal, input: CreateLinkInput) {
      yield* checkDestination(own, input.url)
      yield* checkCustomSlug(input.customSlug)
      return yield* withinLinkQuota(principal, insertLink(links, outbox, principal, input))
    })

    const get = Effect.fn("Links.get")((principal: Principal, id: string) => owned(links, principal, id))

    /** One keyset page of the caller's links matching the search, newest first. */
    const list = Effect.fn("Links.list")((principal: Principal, search: LinkSearch) =>
      links.search(principal.accountId, search)
    )

    /** Every link of the caller matching the filter, newest first, read in pages (memory stays flat). */
    const exportRows = (principal: Principal, filter: LinkFilter): Stream.Stream<Link> =>
      links.streamAll(principal.accountId, filter)

    const update = Effect.fn("Links.update")(function* (principal: Principal, id: string, url: string) {
      const current = yield* changeable(links, principal, id)
      yield* checkDestination(own, url)
      const link = yield* links.setDestination(current.id, url)
      yield* appendLinkEvent(outbox, "link.updated", link)
      return link
    })

    const disable = Effect.fn("Links.disable")(function* (principal: Principal, id: string) {
      const current = yield* owned(links, principal, id, true)
      // Disabling twice is not an error: the link is disabled, as asked (and no new event).
      if (current.status === "disabled") return current
      const link = yield* links.disable(current.id)
      yield* appendLinkEvent(outbox, "link.disabled", link)
      return link
    })

    /** The link whose options (utm, expiresAt) the caller reads. */
    const getOptions = Effect.fn("Links.getOptions")((principal: Principal, id: string) => owned(links, principal, id))

    /** Changes the options given (undefined: kept, null: cleared). */
    const updateOptions = Effect.fn("Links.updateOptions")(function* (
      principal: Principal,
      id: string,
      change: LinkOptionsChange
    ) {
      const current = yield* changeable(links, principal, id)
      if (change.expiresAt instanceof Date) {
        yield* checkExpiryCeiling(plans.limits(principal.plan), principal, change.expiresAt)
      }
      const link = yield* links.setOptions(current.id, change)
      yield* appendLinkEvent(outbox, "link.updated", link)
      return link
    })

    /**
     * What a QR code of the caller's link encodes: its canonical short URL (the API swaps the
     * base for a verified custom domain's when asked, Domains.baseOf).
     */
    const qr = Effect.fn("Links.qr")(function* (principal: Principal, id: string) {
      const link = yield* owned(links, principal, id)
      return { link, url: shortUrl(config.shortBase, link) }
    })

    /** The base of the links' short URLs ({short_base}), for their API records. */
    const shortBase = config.shortBase

    return { create, get, list, exportRows, update, disable, getOptions, updateOptions, qr, shortBase } as const
  })
}) {}
