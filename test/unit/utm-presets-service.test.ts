import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { UtmPresets } from "../../apps/api/UtmPresets/UtmPresets.js"
import { memoryPorts, principal } from "../support/memoryPorts.js"

/** The UtmPresets service over fresh in-memory ports; `state` is what it changed. */
const setup = () => {
  const ports = memoryPorts()
  const layer = UtmPresets.Default.pipe(Layer.provide(ports.layer))
  const run = <A, E>(f: (presets: UtmPresets) => Effect.Effect<A, E>) =>
    Effect.flatMap(UtmPresets, f).pipe(Effect.provide(layer))
  return { state: ports.state, run }
}

const alice = principal("acct_alice")
const bob = principal("acct_bob")
const newsletter = { name: "Newsletter", utm: { utm_source: "newsletter", utm_medium: "email" } }

describe("UtmPresets service", () => {
  it.effect("a second preset of the same name in the account is NameTaken; another account may use the name", () => {
    const { state, run } = setup()
    return run((presets) =>
      Effect.gen(function* () {
        const created = yield* presets.create(alice, newsletter)
        expect(created).toMatchObject({ accountId: "acct_alice", name: "Newsletter", utm: newsletter.utm })
        expect(created.id).toMatch(/^utmp_/)
        const error = yield* Effect.flip(presets.create(alice, { ...newsletter, utm: { utm_source: "other" } }))
        expect(error).toMatchObject({
          _tag: "NameTaken",
          message: "The account already has a UTM preset with this name.",
          detail: "name: 'Newsletter' is taken"
        })
        yield* presets.create(bob, newsletter)
        expect(state.presets.size).toBe(2)
      })
    )
  })

  it.effect("renaming onto a taken name is NameTaken and changes nothing; changing only utm keeps the name", () => {
    const { state, run } = setup()
    return run((presets) =>
      Effect.gen(function* () {
        yield* presets.create(alice, newsletter)
        const other = yield* presets.create(alice, { name: "Ads", utm: { utm_source: "ads" } })
        const error = yield* Effect.flip(presets.update(alice, other.id, { name: "Newsletter" }))
        expect(error).toMatchObject({ _tag: "NameTaken", detail: "name: 'Newsletter' is taken" })
        expect(state.presets.get(other.id)?.name).toBe("Ads")
        const changed = yield* presets.update(alice, other.id, { utm: { utm_campaign: "spring" } })
        expect(changed).toMatchObject({ name: "Ads", utm: { utm_campaign: "spring" } })
        const renamed = yield* presets.update(alice, other.id, { name: "Paid" })
        expect(renamed.name).toBe("Paid")
      })
    )
  })

  it.effect("another account's preset is NotFound for get, update and remove, and stays as it was", () => {
    const { state, run } = setup()
    return run((presets) =>
      Effect.gen(function* () {
        const preset = yield* presets.create(alice, newsletter)
        for (const attempt of [
          presets.get(bob, preset.id),
          presets.update(bob, preset.id, { name: "Mine" }),
          presets.remove(bob, preset.id)
        ]) {
          expect(yield* Effect.flip(attempt)).toMatchObject({ _tag: "NotFound", message: "No such UTM preset." })
        }
        expect(state.presets.get(preset.id)?.name).toBe("Newsletter")
      })
    )
  })

  it.effect("a malformed id is NotFound and never reaches the repository", () => {
    const { state, run } = setup()
    return run((presets) =>
      Effect.gen(function* () {
        for (const attempt of [
          presets.get(alice, "utmp_\u0000"),
          presets.update(alice, "nope", { name: "x" }),
          presets.remove(alice, `utmp_${"a".repeat(65)}`)
        ]) {
          expect(yield* Effect.flip(attempt)).toMatchObject({ _tag: "NotFound" })
        }
        expect(state.calls).toEqual([])
      })
    )
  })

  it.effect("remove returns the preset as it was, and then it is gone", () => {
    const { state, run } = setup()
    return run((presets) =>
      Effect.gen(function* () {
        const preset = yield* presets.create(alice, newsletter)
        const removed = yield* presets.remove(alice, preset.id)
        expect(removed).toEqual(preset)
        expect(state.presets.size).toBe(0)
        expect(yield* Effect.flip(presets.get(alice, preset.id))).toMatchObject({ _tag: "NotFound" })
        expect(yield* Effect.flip(presets.remove(alice, preset.id))).toMatchObject({ _tag: "NotFound" })
      })
    )
  })

  it.effect("list gives the caller's presets, newest first, after the keyset position", () => {
    const { run } = setup()
    return run((presets) =>
      Effect.gen(function* () {
        const first = yield* presets.create(alice, newsletter)
        const second = yield* presets.create(alice, { name: "Ads", utm: { utm_source: "ads" } })
        yield* presets.create(bob, newsletter)
        expect((yield* presets.list(alice, { limit: 10 })).map((p) => p.id)).toEqual([second.id, first.id])
        expect((yield* presets.list(alice, { afterSeq: second.seq, limit: 10 })).map((p) => p.id)).toEqual([first.id])
      })
    )
  })
})
