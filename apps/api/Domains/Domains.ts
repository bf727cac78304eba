import { Clock, Effect, Either, Option } from "effect"
import type { Principal } from "../../../domain/Account.js"
import {
  type Domain,
  type DomainChange,
  DomainId,
  hostnameDetail,
  isDomainId,
  normalizeHostname,
  proofError,
  recordName
} from "../../../domain/Domain.js"
import { type DomainEvent, DomainEventData, domainEventData } from "../../../domain/DomainEvents.js"
import { DomainDisabled, DomainTaken, InvalidInput, NotFound, QuotaExceeded } from "../../../domain/Errors.js"
import { Topics } from "../../../domain/Events.js"
import { domainQuota, domainRegistrationRate, quotaDetail } from "../../../domain/Plan.js"
import { DnsResolver, type DnsResolverShape } from "../../../domain/ports/DnsResolver.js"
import { DomainRepo, type DomainRepoShape } from "../../../domain/ports/DomainRepo.js"
import { Outbox, type OutboxShape } from "../../../domain/ports/Outbox.js"
import { AppConfig, type AppConfigShape } from "../../../infra/AppConfig.js"
import { newId, newSecret } from "../../../infra/Ids.js"
import { Plans, type PlansShape } from "../../../infra/Plans.js"

const DAY_MS = 86_400_000

/** The service's own host names (lower case, no port): never registrable, nor their subdomains. */
export const ownHostnames = (config: AppConfigShape): ReadonlyArray<string> => [
  ...new Set(
    [config.shortBase, config.apiBase, config.imageHost].map((u) =>
      new URL(u).hostname.toLowerCase().replace(/\.$/, "")
    )
  )
]

/** The caller's domain, or NotFound (another account's, or an id of another shape, is NotFound too). */
const owned = (repo: DomainRepoShape, principal: Principal, id: string, forUpdate = false) =>
  Effect.gen(function* () {
    const found = !isDomainId(id)
      ? Option.none()
      : yield* forUpdate ? repo.findForUpdate(principal.accountId, id) : repo.find(principal.accountId, id)
    if (Option.isNone(found)) return yield* new NotFound({ message: "No such domain." })
    return found.value
  })

/** How a check changes a domain: what it keeps, and the check's outcome. */
const changeOf = (d: Domain, patch: Partial<DomainChange>): DomainChange => ({
  state: d.state,
  lastError: d.lastError,
  lastCheckedAt: d.lastCheckedAt,
  verifiedAt: d.verifiedAt,
  proofMissingSince: d.proofMissingSince,
  ...patch
})

/** The ports the use cases below need. */
interface Ports {
  readonly repo: DomainRepoShape
  readonly dns: DnsResolverShape
  readonly outbox: OutboxShape
  readonly plans: PlansShape
}

const append = (outbox: OutboxShape, type: DomainEvent["type"], d: Domain) =>
  outbox.appendEvent(DomainEventData, Topics.domains, d.id, type, d.accountId, domainEventData(d))

/** The plan's custom_domains and domain_registrations_per_day; Unmetered Partner Keys skip both. */
const checkPlan = ({ plans, repo }: Ports, principal: Principal, now: number) =>
  Effect.gen(function* () {
    const plan = plans.limits(principal.plan)
    const count = domainQuota(plan, principal.unmetered)
    const rate = domainRegistrationRate(plan, principal.unmetered)
    if (count === null && rate === null) return
    // Concurrent registrations of one account wait here, so the counts below hold.
    yield* repo.lockAccount(principal.accountId)
    if (count !== null) {
      const active = yield* repo.countActive(principal.accountId)
      if (active >= count) {
        return yield* new QuotaExceeded({
          message: `The plan's custom domain limit is reached (plan ${principal.plan}); disable one to register another.`,
          detail: quotaDetail("custom_domains", active, count)
        })
      }
    }
    if (rate !== null) {
      const recent = yield* repo.countRegisteredSince(principal.accountId, new Date(now - DAY_MS))
      if (recent >= rate) {
        return yield* new QuotaExceeded({
          message: `The plan's custom domain registration rate is reached (plan ${principal.plan}, 24 hours).`,
          detail: quotaDetail("domain_registrations_per_day", recent, rate)
        })
      }
    }
  })

/** Registers a (normalized, allowed) hostname with a fresh token, within the plan. */
const registerDomain = (ports: Ports, own: ReadonlyArray<string>, principal: Principal, hostname: string) =>
  Effect.gen(function* () {
    const normal = normalizeHostname(hostname, own)
    if (Either.isLeft(normal)) {
      return yield* new InvalidInput({ message: "The hostname is not allowed.", detail: hostnameDetail(normal.left) })
    }
    yield* checkPlan(ports, principal, yield* Clock.currentTimeMillis)
    const inserted = yield* ports.repo.insert({
      id: DomainId.make(newId("dom")),
      accountId: principal.accountId,
      hostname: normal.right,
      state: "pending",
      // A fresh token per registration: a record left in DNS from an earlier one proves nothing.
      token: `shortlinks-verify=${newSecret()}`,
      lastError: null,
      lastCheckedAt: null,
      verifiedAt: null,
      proofMissingSince: null
    })
    if (Option.isNone(inserted)) {
      return yield* new DomainTaken({
        message: "That hostname is already registered.",
        detail: `hostname: '${normal.right}' is registered and not disabled`
      })
    }
    yield* append(ports.outbox, "domain.registered", inserted.value)
    return inserted.value
  })

/** Looks the proof up: null when found, else what was found instead (`last_error`). */
const lookProof = (dns: DnsResolverShape, d: Domain) =>
  Effect.map(dns.txt(recordName(d.hostname)), (found) => proofError(found, d.token))

/** Checks the proof of the caller's (locked) domain now and records the outcome. */
const verifyDomain = ({ dns, outbox, repo }: Ports, principal: Principal, id: string) =>
  Effect.gen(function* () {
    const current = yield* owned(repo, principal, id, true)
    if (current.state === "disabled") {
      return yield* new DomainDisabled({
        message: "A disabled domain cannot be verified; register the hostname again (with a new token)."
      })
    }
    const error = yield* lookProof(dns, current)
    const now = new Date(yield* Clock.currentTimeMillis)
    if (error === null) {
      const d = yield* repo.update(
        current.id,
        changeOf(current, {
          state: "verified",
          lastError: null,
          lastCheckedAt: now,
          verifiedAt: current.state === "verified" ? current.verifiedAt : now,
          proofMissingSince: null
        })
      )
      if (current.state !== "verified") yield* append(outbox, "domain.verified", d)
      return d
    }
    // A verified domain stays verified until the sweep's grace period has passed.
    const d = yield* repo.update(
      current.id,
      changeOf(current, {
        lastError: error,
        lastCheckedAt: now,
        proofMissingSince: current.state === "verified" ? (current.proofMissingSince ?? now) : null
      })
    )
    if (current.state === "pending") yield* append(outbox, "domain.verification_failed", d)
    return d
  })

/**
 * Re-verification of one verified domain (the sweep, which locked it): found, the check is
 * recorded; missing, since when is recorded, and past `graceMs` it goes back to pending.
 */
const recheckDomain = ({ dns, outbox, repo }: Ports, current: Domain, graceMs: number) =>
  Effect.gen(function* () {
    const error = yield* lookProof(dns, current)
    const now = new Date(yield* Clock.currentTimeMillis)
    if (error === null) {
      return yield* repo.update(
        current.id,
        changeOf(current, { lastError: null, lastCheckedAt: now, proofMissingSince: null })
      )
    }
    const since = current.proofMissingSince ?? now
    if (now.getTime() - since.getTime() < graceMs) {
      return yield* repo.update(
        current.id,
        changeOf(current, { lastError: error, lastCheckedAt: now, proofMissingSince: since })
      )
    }
    const d = yield* repo.update(
      current.id,
      changeOf(current, { state: "pending", lastError: error, lastCheckedAt: now, proofMissingSince: since })
    )
    yield* append(outbox, "domain.unverified", d)
    return d
  })

/**
 * Custom domains: registration with a DNS TXT proof, verification, re-verification and
 * disabling; the hosts a link answers on. Like Links, no method opens a transaction: the
 * API's IdempotentOperations (or the sweep, or a test) runs each write in one, so that the
 * change and its domains.v1 event commit together.
 */
export class Domains extends Effect.Service<Domains>()("Domains", {
  effect: Effect.gen(function* () {
    const ports: Ports = {
      repo: yield* DomainRepo,
      dns: yield* DnsResolver,
      outbox: yield* Outbox,
      plans: yield* Plans
    }
    const { outbox, repo } = ports
    const config = yield* AppConfig
    const own = ownHostnames(config)
    const scheme = new URL(config.shortBase).protocol

    const register = Effect.fn("Domains.register")((principal: Principal, hostname: string) =>
      registerDomain(ports, own, principal, hostname)
    )

    const get = Effect.fn("Domains.get")((principal: Principal, id: string) => owned(repo, principal, id))

    const list = Effect.fn("Domains.list")(
      (principal: Principal, page: { readonly afterSeq?: bigint | undefined; readonly limit: number }) =>
        repo.list(principal.accountId, page)
    )

    const verify = Effect.fn("Domains.verify")((principal: Principal, id: string) => verifyDomain(ports, principal, id))

    const disable = Effect.fn("Domains.disable")(function* (principal: Principal, id: string) {
      const current = yield* owned(repo, principal, id, true)
      // Disabling twice is not an error (and no new event).
      if (current.state === "disabled") return current
      const d = yield* repo.update(current.id, changeOf(current, { state: "disabled" }))
      yield* append(outbox, "domain.disabled", d)
      return d
    })

    const recheck = Effect.fn("Domains.recheck")((current: Domain, graceMs: number) =>
      recheckDomain(ports, current, graceMs)
    )

    /** The bases of the account's verified domains (`{scheme}//{hostname}`): a link's other short URLs. */
    const linkBases = Effect.fn("Domains.linkBases")(function* (principal: Principal) {
      const hosts = yield* repo.verifiedHostnames(principal.accountId)
      return hosts.map((h) => `${scheme}//${h}`)
    })

    /** The base a QR code's `domain` asks for: a verified domain of the caller, else InvalidInput. */
    const baseOf = Effect.fn("Domains.baseOf")(function* (principal: Principal, domain: string) {
      const normal = normalizeHostname(domain, own)
      const found = Either.isRight(normal)
        ? yield* repo.findVerified(principal.accountId, normal.right)
        : Option.none<Domain>()
      if (Option.isNone(found)) {
        return yield* new InvalidInput({
          message: "Unknown custom domain.",
          detail: "domain: must be a verified custom domain of the account"
        })
      }
      return `${scheme}//${found.value.hostname}`
    })

    return { register, get, list, verify, disable, recheck, linkBases, baseOf } as const
  })
}) {}
