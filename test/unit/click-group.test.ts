import { describe, expect, it } from "vitest"
import { ClickGroup, FirstSeen } from "../../apps/redirector/ClickGroup.js"
import { ClickRound } from "../../apps/redirector/ClickRound.js"

/** A deterministic draw of numbers in [0, max): the same sequence every run. */
const draws = (count: number, max: number) => {
  let x = 0x2545f491
  return Array.from({ length: count }, () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) % max
  })
}

describe("FirstSeen (an event's link numbers to their index in its list)", () => {
  it("gives each number the order it was first seen in, through every growth, as a Map would", () => {
    const seen = new FirstSeen()
    const expected = new Map<number, number>()
    for (const n of draws(200_000, 1_000_000)) {
      if (!expected.has(n)) expected.set(n, expected.size)
      expect(seen.indexOf(n)).toBe(expected.get(n))
    }
    expect(seen.size).toBe(expected.size)
    // Asked again, in another order: nothing new is added.
    for (const [n, i] of [...expected].reverse()) expect(seen.indexOf(n)).toBe(i)
    expect(seen.size).toBe(expected.size)
  })

  it("numbers that share their low bits, and 0 and the largest link number, are told apart", () => {
    const seen = new FirstSeen()
    const numbers = [0, 2 ** 31 - 2, ...Array.from({ length: 1000 }, (_, k) => (k + 1) << 16)]
    for (const [i, n] of numbers.entries()) expect(seen.indexOf(n)).toBe(i)
    for (const [i, n] of numbers.entries()) expect(seen.indexOf(n)).toBe(i)
    expect(seen.size).toBe(numbers.length)
  })

  it("after clear, numbers start over from index 0", () => {
    const seen = new FirstSeen()
    for (const n of draws(5000, 100)) seen.indexOf(n)
    seen.clear()
    expect(seen.size).toBe(0)
    expect(seen.indexOf(42)).toBe(0)
    expect(seen.indexOf(7)).toBe(1)
    expect(seen.indexOf(42)).toBe(0)
  })
})

describe("ClickGroup's list of links (their ids copied from the round's journal)", () => {
  it("lists each run's link id once, in the order first seen, as JSON: ids of any length, a quote or a backslash escaped", () => {
    const ids = [
      "l",
      "li",
      "lin",
      "link",
      "link_",
      "link_0123456789abcdefghijkl",
      'link_"quoted"',
      "link_back\\slash",
      "\\",
      `link_${"x".repeat(250)}`
    ]
    const round = new ClickRound(16)
    round.beginInMemory()
    // Each id twice, the second time as a later run of the same link.
    for (let twice = 0; twice < 2; twice++) for (const [n, id] of ids.entries()) round.pushRun(n, id, "acct_1")
    const group = new ClickGroup("acct_1")
    const indexes = Array.from({ length: round.runs }, (_, r) => group.linkIndex(round.runLink[r]!, round, r))
    expect(indexes).toEqual([...ids.keys(), ...ids.keys()])
    expect(JSON.parse(group.take()).links).toEqual(ids)
  })
})
