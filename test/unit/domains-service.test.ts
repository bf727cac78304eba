import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { Domains } from "../../apps/api/Domains/Domains.js"
import { recordName } from "../../domain/Domain.js"
import type { PlanLimits } from "../../domain/Plan.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { Plans } from "../../infra/Plans.js"
import { emptyDomainWorld, memoryDomainsLayer } from "../support/memoryDomains.js"
import { memoryPorts, principal } from "../support/memoryPorts.js"

const NOW = Date.parse("2025-03-10T12:00:00.000Z")
const HOUR = 3_600_000

/** The Domains service over in-memory ports (a fake DNS from the world's TXT map), at NOW. */
const setup = (plans: Record<string, Partial<PlanLimits>> = {}) => {
  const world = emptyDomainWorld()
  const ports = memoryPorts()
  const layer = Domains.Default.pipe(
    Layer.provide(memoryDomainsLayer(world)),
    Layer.provide(ports.layer),
    Layer.provide(Plans.make(plans)),
    Layer.provide(AppConfig.make({ shortBase: "https://sho.rt", apiBase: "https://api.sho.rt/v1" }))
  )
  const run = <A, E>(f: (domains: Domains) => Effect.Effect<A, E>) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(NOW)
      return yield* f(yield* Domains)
    }).pipe(Effect.provide(layer))
  return { world, events: ports.state.events, run }
}

const alice = principal("acct_alice")

describe("Domains service", () => {
  it.effect("registers pending with a fresh token per registration and appends domain.registered", () => {
    const { events, run } = setup()
    return run((domains) =>
      Effect.gen(function* () {
        const a = yield* domains.register(alice, "Go.Example.org")
        expect(a).toMatchObject({ hostname: "go.example.org", state: "pending", lastError: null })
        yield* domains.disable(alice, a.id)
        const b = yield* domains.register(alice, "go.example.org")
        expect(b.token).not.toBe(a.token)
        expect(events.map((e) => [e.topic, e.type])).toEqual([
          ["domains.v1", "domain.registered"],
          ["domains.v1", "domain.disabled"],
          ["domains.v1", "domain.registered"]
        ])
        expect(JSON.stringify(events)).not.toContain(a.token)
      })
    )
  })

  it.effect("refuses the service's own hosts and their subdomains, naming the rule", () => {
    const { run } = setup()
    return run((domains) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(domains.register(alice, "links.api.sho.rt"))
        expect(error).toMatchObject({ _tag: "InvalidInput" })
        expect(error.detail).toContain("rule not_own_host")
      })
    )
  })

  it.effect("verify records what DNS said; success makes it verified and the link bases follow", () => {
    const { world, run } = setup()
    return run((domains) =>
      Effect.gen(function* () {
        const d = yield* domains.register(alice, "go.example.org")
        expect((yield* domains.verify(alice, d.id)).lastError).toBe("no TXT record")
        world.timeouts.add(recordName(d.hostname))
        expect((yield* domains.verify(alice, d.id)).lastError).toBe("timeout")
        world.timeouts.clear()
        world.txt.set(recordName(d.hostname), ["nope"])
        expect((yield* domains.verify(alice, d.id)).lastError).toBe("TXT present but value differs")
        expect(yield* domains.linkBases(alice)).toEqual([])
        world.txt.set(recordName(d.hostname), ["nope", d.token])
        const ok = yield* domains.verify(alice, d.id)
        expect(ok).toMatchObject({ state: "verified", lastError: null })
        expect(ok.verifiedAt?.getTime()).toBe(NOW)
        expect(yield* domains.linkBases(alice)).toEqual(["https://go.example.org"])
        expect(yield* domains.baseOf(alice, "GO.EXAMPLE.ORG")).toBe("https://go.example.org")
        expect((yield* Effect.flip(domains.baseOf(principal("acct_bob"), "go.example.org")))._tag).toBe("InvalidInput")
      })
    )
  })

  it.effect("recheck keeps a missing proof within the grace period, then takes the domain back to pending", () => {
    const { world, events, run } = setup()
    return run((domains) =>
      Effect.gen(function* () {
        const d = yield* domains.register(alice, "go.example.org")
        world.txt.set(recordName(d.hostname), [d.token])
        const verified = yield* domains.verify(alice, d.id)
        world.txt.clear()
        const first = yield* domains.recheck(verified, 2 * HOUR)
        expect(first).toMatchObject({ state: "verified", lastError: "no TXT record" })
        expect(first.proofMissingSince?.getTime()).toBe(NOW)
        yield* TestClock.adjust(HOUR)
        expect((yield* domains.recheck(first, 2 * HOUR)).state).toBe("verified")
        yield* TestClock.adjust(HOUR)
        const gone = yield* domains.recheck(first, 2 * HOUR)
        expect(gone.state).toBe("pending")
        expect(events.at(-1)?.type).toBe("domain.unverified")
        expect(yield* domains.linkBases(alice)).toEqual([])
      })
    )
  })

  it.effect("plan limits: count and rate are QuotaExceeded; an Unmetered Partner Key skips them", () => {
    const { run } = setup({ free: { custom_domains: 1, domain_registrations_per_day: 2 } })
    return run((domains) =>
      Effect.gen(function* () {
        const a = yield* domains.register(alice, "a.example.org")
        const full = yield* Effect.flip(domains.register(alice, "b.example.org"))
        expect(full).toMatchObject({ _tag: "QuotaExceeded", detail: "custom_domains: 1 of 1 used" })
        yield* domains.disable(alice, a.id)
        const b = yield* domains.register(alice, "b.example.org")
        yield* domains.disable(alice, b.id)
        const rate = yield* Effect.flip(domains.register(alice, "c.example.org"))
        expect(rate).toMatchObject({ _tag: "QuotaExceeded", detail: "domain_registrations_per_day: 2 of 2 used" })
        yield* domains.register(principal("acct_alice", { unmetered: true }), "c.example.org")
      })
    )
  })

  it.effect("another account's or a malformed id is NotFound", () => {
    const { run } = setup()
    return run((domains) =>
      Effect.gen(function* () {
        const d = yield* domains.register(alice, "go.example.org")
        for (const id of [d.id, "dom_\u0000", "link_x"]) {
          expect((yield* Effect.flip(domains.get(principal("acct_bob"), id)))._tag).toBe("NotFound")
        }
      })
    )
  })
})
