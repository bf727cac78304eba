import { describe, expect, it } from "vitest"
// @ts-expect-error: a plain ES module of bench/ (the benchmarks' summaries import it from `node -e`), no types
import { fixed, median, slicedRounds } from "../../bench/summary.mjs"

describe("the redirect benchmarks' summaries (bench/summary.mjs)", () => {
  it("takes the middle of an odd count and the lower middle of an even one, in number order, the input untouched", () => {
    const xs = [10, 2, 33, 4, 5]
    expect(median(xs)).toBe(5)
    expect(xs).toEqual([10, 2, 33, 4, 5])
    expect(median([0.9, 1.1, 0.95, 1.05])).toBe(0.95)
    expect(median([7])).toBe(7)
  })

  it("rounds to the digits asked for, as a number", () => {
    expect(fixed(0.94567, 4)).toBe(0.9457)
    expect(fixed(12.5, 0)).toBe(13)
  })

  it("reads a run's rounds of slices: ratios by round and by slice, requests a second and CPU a request", () => {
    const round = (a: object, b: object) => JSON.stringify({ a, b })
    const phase = (rps: number, slices: Array<number>, ticks: number, requests: number) => ({
      rps,
      slices_rps: slices,
      server_ticks: ticks,
      service_ticks: ticks / 10,
      requests,
      hz: 100
    })
    const run = slicedRounds([
      round(phase(90, [80, 100], 10, 100_000), phase(100, [100, 100], 12, 100_000)),
      round(phase(99, [99, 99], 30, 100_000), phase(100, [90, 110], 20, 100_000)),
      round(phase(50, [50, 50], 20, 100_000), phase(100, [100, 100], 10, 100_000))
    ])
    expect(run.rounds).toHaveLength(3)
    expect(run.ratio("a", "b")).toBe(0.9)
    expect(run.list("a", "b")).toBe("0.900, 0.990, 0.500")
    expect(run.pairs("a", "b")).toEqual([0.8, 1, 1.1, 0.9, 0.5, 0.5])
    expect(run.rps("a")).toBe(90)
    // 20 ticks of 10 ms for 100,000 requests: 2 µs a request.
    expect(run.cpuUs("a")).toBeCloseTo(2, 10)
    expect(run.cpuUs("b", "service_ticks")).toBeCloseTo(0.12, 10)
  })
})
