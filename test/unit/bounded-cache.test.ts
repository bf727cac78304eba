import { describe, expect, it } from "vitest"
import { BoundedCache } from "../../infra/BoundedCache.js"

describe("BoundedCache", () => {
  it("answers what was set, and undefined for what was not", () => {
    const cache = new BoundedCache<string, number>({ maxWeight: 10 })
    cache.set("a", 1)
    expect(cache.get("a")).toBe(1)
    expect(cache.get("b")).toBeUndefined()
    cache.set("a", 2)
    expect(cache.get("a")).toBe(2)
    expect(cache.size).toBe(1)
  })

  it("never holds more than its bound, and keeps the entries used since the last turn", () => {
    const cache = new BoundedCache<number, number>({ maxWeight: 4 })
    for (let i = 0; i < 100; i++) {
      cache.set(i, i)
      // 0 is used all the time: it survives every turn of the generations.
      expect(cache.get(0)).toBe(0)
      expect(cache.size).toBeLessThanOrEqual(4)
    }
    expect(cache.get(99)).toBe(99)
    expect(cache.get(1)).toBeUndefined()
  })

  it("evicts entries that were not used since the last turn", () => {
    const cache = new BoundedCache<string, number>({ maxWeight: 4 })
    cache.set("a", 1)
    cache.set("b", 2)
    cache.set("c", 3) // the young generation is full: a and b become the old one
    expect(cache.get("a")).toBe(1) // moved back to the young generation
    cache.set("d", 4) // another turn: b, never used, goes
    cache.set("e", 5)
    expect(cache.get("b")).toBeUndefined()
    expect(cache.get("a")).toBe(1)
  })

  it("bounds the total weight, and refuses an entry heavier than its limit", () => {
    const cache = new BoundedCache<string, Uint8Array>({
      maxWeight: 1000,
      weigh: (bytes) => bytes.byteLength,
      maxEntryWeight: 125
    })
    cache.set("big", new Uint8Array(126))
    expect(cache.get("big")).toBeUndefined()
    for (let i = 0; i < 50; i++) {
      cache.set(`k${i}`, new Uint8Array(100))
      expect(cache.weight).toBeLessThanOrEqual(1000)
    }
    expect(cache.get("k49")?.byteLength).toBe(100)
    expect(cache.get("k0")).toBeUndefined()
  })

  it("removes entries on demand, and lists its keys as a copy", () => {
    const cache = new BoundedCache<number, string>({ maxWeight: 10 })
    for (let i = 0; i < 4; i++) cache.set(i, String(i))
    for (const key of cache.keys()) if (key < 2) cache.delete(key)
    expect(cache.keys().sort()).toEqual([2, 3])
    expect(cache.delete(7)).toBe(false)
    cache.clear()
    expect(cache.size).toBe(0)
    expect(cache.weight).toBe(0)
  })

  it("memoises a function: computed once per key while it is kept", () => {
    const cache = new BoundedCache<string, string>({ maxWeight: 10 })
    let calls = 0
    const upper = (s: string) => {
      calls++
      return s.toUpperCase()
    }
    expect(cache.getOrCompute("x", upper)).toBe("X")
    expect(cache.getOrCompute("x", upper)).toBe("X")
    expect(calls).toBe(1)
  })
})
