import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Stream, TestClock } from "effect"
import { Links } from "../../apps/api/Links/Links.js"
import type { PlanLimits } from "../../domain/Plan.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { Plans } from "../../infra/Plans.js"
import { memoryPorts, principal } from "../support/memoryPorts.js"

const NOW = Date.parse("2025-03-10T12:00:00.000Z")
const DAY = 86_400_000

/** The Links service over fresh in-memory ports, at NOW on the TestClock; `state` is what it changed. */
const setup = (plans: Record<string, Partial<PlanLimits>> = {}) => {
  const ports = memoryPorts()
  const layer = Links.Default.pipe(
    Layer.provide(ports.layer),
    Layer.provide(Plans.make(plans)),
    Layer.provide(
      AppConfig.make({
        shortBase: "http://sho.rt",
        apiBase: "http://api.example:8080/v1",
        imageHost: "http://img.example"
      })
    )
  )
  const run = <A, E>(f: (links: Links) => Effect.Effect<A, E>) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(NOW)
      return yield* f(yield* Links)
    }).pipe(Effect.provide(layer))
  return { state: ports.state, run }
}

const alice = principal("acct_alice")
const bob = principal("acct_bob")

describe("Links service", () => {
  it.effect("refuses a destination on the service's own short host", () => {
    const { state, run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(links.create(alice, { url: "http://SHO.RT./abc" }))
        expect(error._tag).toBe("UrlNotAllowed")
        expect(error).toMatchObject({
          message: "The destination is one of this service's own hosts.",
          reason: "url: must not point to this service"
        })
        const api = yield* Effect.flip(links.create(alice, { url: "http://api.example:8080/v1/links" }))
        expect(api._tag).toBe("UrlNotAllowed")
        expect(state.links.size).toBe(0)
        expect(state.events).toHaveLength(0)
      })
    )
  })

  it.effect("refuses a loopback destination on one of the service's ports, but not on another port", () => {
    const { run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(links.create(alice, { url: "http://127.0.0.1:8080/x" }))
        expect(error).toMatchObject({
          _tag: "UrlNotAllowed",
          reason: "url: must not point to this service (a loopback host on one of its ports)"
        })
        const elsewhere = yield* links.create(alice, { url: "http://127.0.0.1:9999/x" })
        expect(elsewhere.destinationUrl).toBe("http://127.0.0.1:9999/x")
      })
    )
  })

  it.effect("a destination on the service's own host is refused on update too", () => {
    const { run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const link = yield* links.create(alice, { url: "https://example.com/" })
        const error = yield* Effect.flip(links.update(alice, link.id, "http://sho.rt/loop"))
        expect(error._tag).toBe("UrlNotAllowed")
      })
    )
  })

  it.effect("a reserved custom slug is SlugTaken, whatever its case; a taken one is SlugTaken too", () => {
    const { state, run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const reserved = yield* Effect.flip(links.create(alice, { url: "https://example.com/", customSlug: "Admin" }))
        expect(reserved).toMatchObject({
          _tag: "SlugTaken",
          message: "That slug is reserved.",
          detail: "custom_slug: 'Admin' is reserved"
        })
        expect(state.calls).not.toContain("links.insert")
        yield* links.create(alice, { url: "https://example.com/", customSlug: "spring-sale" })
        const taken = yield* Effect.flip(links.create(bob, { url: "https://example.org/", customSlug: "spring-sale" }))
        expect(taken).toMatchObject({
          _tag: "SlugTaken",
          message: "That slug is already in use.",
          detail: "custom_slug: 'spring-sale' is taken"
        })
        expect(state.links.size).toBe(1)
        expect(state.events).toHaveLength(1)
      })
    )
  })

  it.effect("a disabled link cannot be updated (LinkDisabled) and disabling twice is not an error", () => {
    const { state, run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const link = yield* links.create(alice, { url: "https://example.com/" })
        const disabled = yield* links.disable(alice, link.id)
        expect(disabled.status).toBe("disabled")
        const again = yield* links.disable(alice, link.id)
        expect(again.status).toBe("disabled")
        const update = yield* Effect.flip(links.update(alice, link.id, "https://example.org/"))
        expect(update).toMatchObject({ _tag: "LinkDisabled", message: "A disabled link cannot be changed." })
        const options = yield* Effect.flip(links.updateOptions(alice, link.id, { utm: { utm_source: "x" } }))
        expect(options._tag).toBe("LinkDisabled")
        expect(state.links.get(link.id)?.destinationUrl).toBe("https://example.com/")
        expect(state.events.map((e) => e.type)).toEqual(["link.created", "link.disabled"])
      })
    )
  })

  it.effect("the monthly link quota refuses the 101st link and nothing is inserted", () => {
    const { state, run } = setup({ free: { links_per_month: 100 } })
    return run((links) =>
      Effect.gen(function* () {
        for (let i = 0; i < 100; i++) yield* links.create(alice, { url: `https://example.com/${i}` })
        const error = yield* Effect.flip(
          links.create(alice, { url: "https://example.com/101", customSlug: "one-more" })
        )
        expect(error).toMatchObject({
          _tag: "QuotaExceeded",
          message: "The plan's monthly link quota is used up (plan free, 2025-03 UTC).",
          detail: "links_per_month: 100 of 100 used"
        })
        expect(state.links.size).toBe(100)
        expect([...state.links.values()].some((l) => l.slug === "one-more")).toBe(false)
        expect(state.events).toHaveLength(100)
        expect(state.usage.get("acct_alice/2025-03/links")).toBe(100)
        // Another account has its own counter.
        yield* links.create(bob, { url: "https://example.com/bob" })
      })
    )
  })

  it.effect("unmetered keys skip the monthly link quota but are still counted", () => {
    const { state, run } = setup({ free: { links_per_month: 1 } })
    const partner = principal("acct_alice", { unmetered: true })
    return run((links) =>
      Effect.gen(function* () {
        yield* links.create(partner, { url: "https://example.com/1" })
        yield* links.create(partner, { url: "https://example.com/2" })
        expect(state.usage.get("acct_alice/2025-03/links")).toBe(2)
        const metered = yield* Effect.flip(links.create(alice, { url: "https://example.com/3" }))
        expect(metered).toMatchObject({ _tag: "QuotaExceeded", detail: "links_per_month: 2 of 1 used" })
      })
    )
  })

  it.effect("an expiry beyond the plan ceiling is QuotaExceeded; unmetered keys skip it", () => {
    const { state, run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const link = yield* links.create(alice, { url: "https://example.com/" })
        const atCeiling = yield* links.updateOptions(alice, link.id, { expiresAt: new Date(NOW + 365 * DAY) })
        expect(atCeiling.expiresAt?.getTime()).toBe(NOW + 365 * DAY)
        const error = yield* Effect.flip(
          links.updateOptions(alice, link.id, { expiresAt: new Date(NOW + 365 * DAY + 1) })
        )
        expect(error).toMatchObject({
          _tag: "QuotaExceeded",
          message: "expires_at is further ahead than the plan allows (plan free).",
          detail: "link_expiry_max_days: 365 (expires_at may be at most 2026-03-10T12:00:00.000Z)"
        })
        const partner = principal("acct_alice", { unmetered: true })
        const far = yield* links.updateOptions(partner, link.id, { expiresAt: new Date(NOW + 3650 * DAY) })
        expect(far.expiresAt?.getTime()).toBe(NOW + 3650 * DAY)
        const pro = principal("acct_alice", { plan: "pro" })
        yield* links.updateOptions(pro, link.id, { expiresAt: new Date(NOW + 3650 * DAY) })
        // Clearing the expiry needs no ceiling check.
        const cleared = yield* links.updateOptions(alice, link.id, { expiresAt: null })
        expect(cleared.expiresAt).toBeNull()
        expect(state.events.filter((e) => e.type === "link.updated")).toHaveLength(4)
      })
    )
  })

  it.effect("each change appends its event to the outbox", () => {
    const { state, run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const link = yield* links.create(alice, { url: "https://example.com/", customSlug: "launch" })
        yield* links.update(alice, link.id, "https://example.org/")
        yield* links.updateOptions(alice, link.id, { utm: { utm_source: "news" } })
        yield* links.disable(alice, link.id)
        expect(state.events.map((e) => [e.topic, e.key, e.type, e.account_id])).toEqual([
          ["links.v1", link.id, "link.created", "acct_alice"],
          ["links.v1", link.id, "link.updated", "acct_alice"],
          ["links.v1", link.id, "link.updated", "acct_alice"],
          ["links.v1", link.id, "link.disabled", "acct_alice"]
        ])
        expect(state.events[3]?.data).toEqual({
          id: link.id,
          slug: "launch",
          destination_url: "https://example.org/",
          created_at: "2025-03-10T12:00:00.000Z",
          updated_at: "2025-03-10T12:00:00.000Z",
          expires_at: null,
          utm: { utm_source: "news" },
          publication_status: "disabled"
        })
      })
    )
  })

  it.effect(
    "another account's link and a malformed id are NotFound; a malformed id never reaches the repository",
    () => {
      const { state, run } = setup()
      return run((links) =>
        Effect.gen(function* () {
          const link = yield* links.create(alice, { url: "https://example.com/" })
          const attempts: ReadonlyArray<Effect.Effect<unknown, { readonly _tag: string }>> = [
            links.get(bob, link.id),
            links.getOptions(bob, link.id),
            links.update(bob, link.id, "https://example.org/"),
            links.disable(bob, link.id),
            links.qr(bob, link.id)
          ]
          for (const attempt of attempts) {
            expect(yield* Effect.flip(attempt)).toMatchObject({ _tag: "NotFound", message: "No such link." })
          }
          state.calls.length = 0
          expect(yield* Effect.flip(links.get(alice, "link_\u0000"))).toMatchObject({ _tag: "NotFound" })
          expect(state.calls).toEqual([])
          expect(state.links.get(link.id)?.status).toBe("active")
        })
      )
    }
  )

  it.effect("a QR code encodes the canonical short URL", () => {
    const { run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const link = yield* links.create(alice, { url: "https://example.com/", customSlug: "qr-code" })
        const target = yield* links.qr(alice, link.id)
        expect(target.url).toBe("http://sho.rt/qr-code")
      })
    )
  })

  it.effect("list and export give the caller's links only, newest first, with the search applied", () => {
    const { run } = setup()
    return run((links) =>
      Effect.gen(function* () {
        const a = yield* links.create(alice, { url: "https://example.com/a" })
        const b = yield* links.create(alice, { url: "https://example.org/b" })
        yield* links.create(bob, { url: "https://example.com/bob" })
        yield* links.disable(alice, a.id)
        expect((yield* links.list(alice, { limit: 10 })).map((l) => l.id)).toEqual([b.id, a.id])
        expect((yield* links.list(alice, { limit: 10, status: "active" })).map((l) => l.id)).toEqual([b.id])
        const exported = yield* Stream.runCollect(links.exportRows(alice, { q: "EXAMPLE.COM" }))
        expect([...exported].map((l) => l.id)).toEqual([a.id])
      })
    )
  })
})
