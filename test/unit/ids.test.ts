import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { firstFree } from "../../infra/Ids.js"

describe("firstFree: draw random values until the store takes one", () => {
  it.effect("stops at the first draw the store takes, drawing afresh each time", () =>
    Effect.gen(function* () {
      const drawn: Array<number> = []
      const attempt = Effect.sync(() => {
        drawn.push(drawn.length)
        return drawn.length < 3 ? Option.none() : Option.some(`value ${drawn.length}`)
      })
      expect(yield* firstFree(attempt, "slug")).toBe("value 3")
      expect(drawn).toEqual([0, 1, 2])
    })
  )

  it.effect("after the given number of taken draws it is a defect naming what could not be allocated", () =>
    Effect.gen(function* () {
      let draws = 0
      const exit = yield* Effect.exit(
        firstFree(
          Effect.sync(() => {
            draws++
            return Option.none<string>()
          }),
          "image id",
          8
        )
      )
      expect(draws).toBe(8)
      expect(Exit.isFailure(exit) && String(Exit.causeOption(exit).pipe(Option.getOrThrow))).toContain(
        "could not allocate a free image id"
      )
    })
  )
})
