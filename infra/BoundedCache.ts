export interface BoundedCacheOptions<V> {
  /** The bound on the total weight of the entries (their number, when `weigh` is not given). */
  readonly maxWeight: number
  /** An entry's weight (bytes, say); 1 when not given. Called when the entry is set and when it moves. */
  readonly weigh?: (value: V) => number
  /** An entry heavier than this is not kept (it would push out many others); at most half the bound. */
  readonly maxEntryWeight?: number
}

/**
 * The one in-process cache of the code base: synchronous and without Effect, so that it can
 * sit on the redirector's hot path, and bounded by a total weight (a number of entries, or
 * bytes). One eviction rule, two generations (the "hashlru" scheme): new entries go into the
 * young generation; a hit in the old one moves the entry to the young one; when the young
 * generation would pass half the bound, the old one is dropped whole and the young one
 * becomes the old. What was used since the last turn is kept, like least-recently-used, but
 * a hit in the young generation is a single map lookup: no bookkeeping, no allocation.
 * Staleness is the owner's: it removes entries (`delete`, `clear`) or checks their age.
 */
export class BoundedCache<K, V> {
  private young = new Map<K, V>()
  private old = new Map<K, V>()
  private youngWeight = 0
  private oldWeight = 0
  private readonly half: number
  private readonly maxEntryWeight: number
  private readonly weigh: ((value: V) => number) | undefined

  constructor(options: BoundedCacheOptions<V>) {
    this.half = options.maxWeight / 2
    this.maxEntryWeight = Math.min(this.half, options.maxEntryWeight ?? this.half)
    this.weigh = options.weigh
  }

  /** The number of entries. */
  get size(): number {
    return this.young.size + this.old.size
  }

  /** The total weight of the entries. */
  get weight(): number {
    return this.youngWeight + this.oldWeight
  }

  /** The value of a key, or undefined. */
  get(key: K): V | undefined {
    const hit = this.young.get(key)
    if (hit !== undefined) return hit
    const old = this.old.get(key)
    if (old === undefined) return undefined
    const weight = this.weightOf(old)
    this.old.delete(key)
    this.oldWeight -= weight
    this.addYoung(key, old, weight)
    return old
  }

  /** Sets a key, replacing its value. */
  set(key: K, value: V): void {
    this.delete(key)
    const weight = this.weightOf(value)
    if (weight <= this.maxEntryWeight) this.addYoung(key, value, weight)
  }

  /** The cached value of a key, or `compute(key)` cached: a memo of a pure function. */
  getOrCompute(key: K, compute: (key: K) => V): V {
    let value = this.get(key)
    if (value === undefined) {
      value = compute(key)
      this.set(key, value)
    }
    return value
  }

  delete(key: K): boolean {
    const young = this.young.get(key)
    if (young !== undefined) {
      this.young.delete(key)
      this.youngWeight -= this.weightOf(young)
      return true
    }
    const old = this.old.get(key)
    if (old === undefined) return false
    this.old.delete(key)
    this.oldWeight -= this.weightOf(old)
    return true
  }

  clear(): void {
    this.young = new Map()
    this.old = new Map()
    this.youngWeight = 0
    this.oldWeight = 0
  }

  /** The keys (a copy: deleting meanwhile is safe). */
  keys(): Array<K> {
    return [...this.old.keys(), ...this.young.keys()]
  }

  private weightOf(value: V): number {
    return this.weigh === undefined ? 1 : this.weigh(value)
  }

  private addYoung(key: K, value: V, weight: number): void {
    if (this.youngWeight + weight > this.half) {
      this.old = this.young
      this.oldWeight = this.youngWeight
      this.young = new Map()
      this.youngWeight = 0
    }
    this.young.set(key, value)
    this.youngWeight += weight
  }
}
