import { describe, expect, it } from "vitest"
import { viewOf } from "../../apps/redirector/Bytes.js"
import { type LinkState, SlugTable } from "../../apps/redirector/SlugTable.js"

describe("prepared answers in the slug table", () => {
  const state = (over: Partial<LinkState> = {}): LinkState => ({
    id: "link_1",
    accountId: "acc_1",
    slug: "abcdefg",
    destinationUrl: "https://e.com/a",
    active: true,
    utm: null,
    expiresAt: null,
    updatedAt: 1000,
    ...over
  })

  it("holds the final Location (UTM merged, encoded) per path, computed when the link arrives", () => {
    const table = new SlugTable()
    table.apply(state({ destinationUrl: "https://e.com/a b", utm: { utm_source: "x" }, expiresAt: 5000 }))
    expect(table.entryOf("/abcdefg")).toEqual({
      location: "https://e.com/a%20b?utm_source=x",
      linkId: "link_1",
      accountId: "acc_1",
      expiresAt: 5000
    })
    table.apply(state({ updatedAt: 1001 }))
    expect(table.entryOf("/abcdefg")?.expiresAt).toBe(Number.POSITIVE_INFINITY)
  })

  it("ignores a state older than the one it holds, applies an equal or newer one", () => {
    const table = new SlugTable()
    table.apply(state({ destinationUrl: "https://e.com/new", updatedAt: 2000 }))
    expect(table.apply(state({ destinationUrl: "https://e.com/old", updatedAt: 1999 }))).toBe(false)
    expect(table.entryOf("/abcdefg")?.location).toBe("https://e.com/new")
    expect(table.apply(state({ destinationUrl: "https://e.com/same-ms", updatedAt: 2000 }))).toBe(true)
    expect(table.entryOf("/abcdefg")?.location).toBe("https://e.com/same-ms")
  })

  it("a disabled link leaves the table, and a late older event cannot bring it back", () => {
    const table = new SlugTable()
    table.apply(state({ updatedAt: 1000 }))
    table.apply(state({ active: false, updatedAt: 3000 }))
    expect(table.has("/abcdefg")).toBe(false)
    expect(table.apply(state({ updatedAt: 2000 }))).toBe(false)
    expect(table.has("/abcdefg")).toBe(false)
  })

  it("does not serve a destination that is not an absolute http(s) URL", () => {
    const table = new SlugTable()
    table.apply(state({ destinationUrl: "javascript:alert(1)" }))
    expect(table.size).toBe(0)
  })

  it("keeps a record's link number and ids through updates that move it; a state with another id for the path takes another record and number", () => {
    const table = new SlugTable()
    table.apply(state())
    table.apply(state({ id: "link_2", accountId: "acc_2", slug: "other" }))
    const number = table.linkNumber(table.rowOf("/abcdefg"))
    expect(table.linkNumber(table.rowOf("/other"))).not.toBe(number)
    table.apply(state({ destinationUrl: `https://e.com/${"x".repeat(300)}`, accountId: "acc_9", updatedAt: 1001 }))
    const row = table.rowOf("/abcdefg")
    expect([table.linkNumber(row), table.linkId(row), table.accountId(row)]).toEqual([number, "link_1", "acc_9"])
    // The run entry a click on it copies: each id's u32 length and bytes.
    const out = Buffer.alloc(64)
    const end = table.writeRun(row, viewOf(out), 3)
    expect(end).toBe(3 + 4 + 6 + 4 + 5)
    expect([
      out.readUInt32LE(3),
      out.toString("latin1", 7, 13),
      out.readUInt32LE(13),
      out.toString("latin1", 17, 22)
    ]).toEqual([6, "link_1", 5, "acc_9"])
    table.apply(state({ id: "link_3", updatedAt: 1002 }))
    expect(table.linkId(table.rowOf("/abcdefg"))).toBe("link_3")
    expect(table.linkNumber(table.rowOf("/abcdefg"))).not.toBe(number)
    expect(table.rowCount).toBe(2)
    expect(table.location(table.rowOf("/abcdefg")).length).toBe("https://e.com/a".length)
  })

  it("writes a run entry of ids of any length exactly: not a byte before it or past its end", () => {
    const table = new SlugTable()
    // Lengths around the four-byte steps of the copy; the Location long enough for the arena for some.
    for (const n of [1, 2, 3, 4, 5, 7, 8, 9, 27, 255]) {
      const id = "i".repeat(n - 1) + String(n % 10)
      const accountId = `a${"b".repeat(Math.max(0, 11 - n))}`.slice(0, Math.max(1, 11 - n))
      const slug = `len${n}`
      table.apply(state({ id, accountId, slug, destinationUrl: `https://e.com/${"x".repeat(n * 3)}` }))
      const out = Buffer.alloc(600, 0xee)
      const at = 5
      const end = table.writeRun(table.rowOf(`/${slug}`), viewOf(out), at)
      const expected = Buffer.alloc(8 + n + accountId.length)
      expected.writeUInt32LE(n, 0)
      expected.write(id, 4, "latin1")
      expected.writeUInt32LE(accountId.length, 4 + n)
      expected.write(accountId, 8 + n, "latin1")
      expect(end).toBe(at + expected.length)
      expect(out.subarray(at, end)).toEqual(expected)
      expect([...out.subarray(0, at), ...out.subarray(end)].every((b) => b === 0xee)).toBe(true)
    }
  })

  it("does not hold a link whose link or account id is not visible ASCII (the service makes none)", () => {
    const table = new SlugTable()
    expect(table.apply(state({ id: "link_ü" }))).toBe(false)
    expect(table.apply(state({ accountId: "acc 1" }))).toBe(false)
    expect(table.apply(state({ id: `link_${"x".repeat(300)}` }))).toBe(false)
    expect(table.rowCount).toBe(0)
  })

  it("never lets a link take a reserved path such as /healthz or /readyz, whatever its case", () => {
    const table = new SlugTable()
    table.apply(state({ id: "link_a", slug: "healthz" }))
    table.apply(state({ id: "link_b", slug: "ReadyZ" }))
    expect(table.size).toBe(0)
  })
})

describe("the slug table's records", () => {
  const link = (n: number, over: Partial<LinkState> = {}): LinkState => ({
    id: `link_${n}`,
    accountId: `acc_${n % 3}`,
    slug: `slug${n}`,
    destinationUrl: `https://e.com/${n}`,
    active: true,
    utm: null,
    expiresAt: null,
    updatedAt: 1000,
    ...over
  })

  it("a disabled link stops answering and keeps its path's number; enabled again it answers as before", () => {
    const table = new SlugTable()
    for (let n = 0; n < 3; n++) table.apply(link(n))
    table.apply(link(1, { active: false, updatedAt: 2000 }))
    expect(table.rowOf("/slug1")).toBe(-1)
    expect(table.size).toBe(2)
    table.apply(link(3))
    expect(table.rowCount).toBe(4)
    expect(table.entryOf("/slug3")).toEqual({
      location: "https://e.com/3",
      linkId: "link_3",
      accountId: "acc_0",
      expiresAt: Number.POSITIVE_INFINITY
    })
    // The disabled one stays out, whatever older state comes late; a newer one brings it back.
    expect(table.apply(link(1, { updatedAt: 1999 }))).toBe(false)
    expect(table.has("/slug1")).toBe(false)
    expect(table.apply(link(1, { updatedAt: 2001 }))).toBe(true)
    expect(table.entryOf("/slug1")).toEqual({
      location: "https://e.com/1",
      linkId: "link_1",
      accountId: "acc_1",
      expiresAt: Number.POSITIVE_INFINITY
    })
    expect(table.rowCount).toBe(4)
    expect(table.size).toBe(4)
  })

  it("a link that stops redirecting for its destination or slug leaves a tombstone with its version too", () => {
    const table = new SlugTable()
    table.apply(link(1, { destinationUrl: "javascript:alert(1)", updatedAt: 5000 }))
    expect(table.has("/slug1")).toBe(false)
    expect(table.apply(link(1, { updatedAt: 4999 }))).toBe(false)
    expect(table.has("/slug1")).toBe(false)
    expect(table.apply(link(1, { updatedAt: 5001 }))).toBe(true)
    expect(table.entryOf("/slug1")?.location).toBe("https://e.com/1")
    expect(table.size).toBe(1)
  })

  it("an update changes what it answers, expiry included, in its bucket while it fits, in the arena when not", () => {
    const table = new SlugTable()
    table.apply(link(7, { expiresAt: 10_000 }))
    const row = table.rowOf("/slug7")
    const bytes = table.arenaBytes
    // Shorter, or longer within the bucket's 128 bytes: the same bucket, no arena bytes.
    table.apply(link(7, { destinationUrl: "https://e.co/7", updatedAt: 1001 }))
    table.apply(link(7, { destinationUrl: "https://e.com/moved", utm: { utm_source: "x" }, updatedAt: 1002 }))
    expect(table.rowOf("/slug7")).toBe(row)
    expect(table.arenaBytes).toBe(bytes)
    expect(table.entryOf("/slug7")).toEqual({
      location: "https://e.com/moved?utm_source=x",
      linkId: "link_7",
      accountId: "acc_1",
      expiresAt: Number.POSITIVE_INFINITY
    })
    // Too long for the bucket: its bytes go to the arena; the path still finds the same row.
    const long = `https://e.com/${"y".repeat(150)}`
    table.apply(link(7, { destinationUrl: long, updatedAt: 1003 }))
    expect(table.rowOf("/slug7")).toBe(row)
    expect(table.arenaBytes).toBeGreaterThan(bytes + 150)
    expect(table.entryOf("/slug7")?.location).toBe(long)
    // Shorter again but still too long: in place in the arena. Short: back in the bucket.
    const arena = table.arenaBytes
    table.apply(link(7, { destinationUrl: long.slice(0, -10), updatedAt: 1004 }))
    expect(table.arenaBytes).toBe(arena)
    expect(table.entryOf("/slug7")?.location).toBe(long.slice(0, -10))
    table.apply(link(7, { destinationUrl: "https://e.com/7", expiresAt: 20_000, updatedAt: 1005 }))
    expect(table.entryOf("/slug7")).toEqual({
      location: "https://e.com/7",
      linkId: "link_7",
      accountId: "acc_1",
      expiresAt: 20_000
    })
    expect(table.apply(link(7, { expiresAt: 10_000, updatedAt: 1000 }))).toBe(false)
    expect(table.expiresAt(table.rowOf("/slug7"))).toBe(20_000)
    expect(table.size).toBe(1)
    expect(table.rowCount).toBe(1)
  })

  it("compacts its arena once moved records are worth it, and every link still answers its latest state", () => {
    const table = new SlugTable(4096)
    const count = 300
    for (let n = 0; n < count; n++) table.apply(link(n))
    // Each round's Locations are longer than the last: from the fourth round on they do not
    // fit in their buckets, and every record's bytes move in the arena, again and again.
    for (let round = 1; round <= 6; round++) {
      for (let n = 0; n < count; n++) {
        table.apply(
          link(n, { destinationUrl: `https://e.com/${"x".repeat(round * 20)}/${n}`, updatedAt: 1000 + round })
        )
      }
      // A tombstone moves too when it is compacted, version and all.
      if (round === 1) table.apply(link(5, { active: false, updatedAt: 5000 }))
    }
    // Without compaction six rounds of moves would take several times the live records' bytes.
    const live = count * (32 + 8 + 8 + 14 + 120)
    expect(table.arenaBytes).toBeLessThan(live * 2.5)
    for (let n = 0; n < count; n++) {
      if (n === 5) continue
      expect(table.entryOf(`/slug${n}`)?.location).toBe(`https://e.com/${"x".repeat(120)}/${n}`)
    }
    expect(table.has("/slug5")).toBe(false)
    expect(table.apply(link(5, { updatedAt: 4999 }))).toBe(false)
    expect(table.size).toBe(count - 1)
  })

  it("finds nothing for paths it cannot hold byte for byte: too long, not visible ASCII, a prefix or an extension", () => {
    const table = new SlugTable()
    table.apply(link(1, { slug: "abcd" }))
    expect(table.apply(link(2, { slug: "caf\u00e9" }))).toBe(false)
    expect(table.has("/caf\u00e9")).toBe(false)
    expect(table.has("/abcd")).toBe(true)
    expect(table.has("/abc")).toBe(false)
    expect(table.has("/abcde")).toBe(false)
    expect(table.has("/ABCD")).toBe(false)
    expect(table.has(`/abcd${"x".repeat(300)}`)).toBe(false)
    expect(table.has("/\u0161bcd")).toBe(false)
    expect(table.rowOf("")).toBe(-1)
  })

  it("grows past its first slots and bytes and keeps every link", () => {
    const table = new SlugTable()
    const count = 5000
    for (let n = 0; n < count; n++) table.apply(link(n, { accountId: `acc_${String(n % 3)}` }))
    expect(table.size).toBe(count)
    expect(table.rowCount).toBe(count)
    for (let n = 0; n < count; n++) {
      expect(table.entryOf(`/slug${n}`)).toEqual({
        location: `https://e.com/${n}`,
        linkId: `link_${n}`,
        accountId: `acc_${n % 3}`,
        expiresAt: Number.POSITIVE_INFINITY
      })
    }
    expect(table.has("/slug5000")).toBe(false)
    expect(table.rowOf("/nothing")).toBe(-1)
  })

  it("a reservation made with links in it keeps them, and takes many more; an absurd estimate is capped", () => {
    const table = new SlugTable()
    for (let n = 0; n < 100; n++) table.apply(link(n))
    table.reserve(20_000)
    // Smaller than what it holds: nothing to do.
    table.reserve(10)
    for (let n = 100; n < 20_000; n++) table.apply(link(n))
    for (const n of [0, 99, 100, 12_345, 19_999]) expect(table.entryOf(`/slug${n}`)?.linkId).toBe(`link_${n}`)
    expect(table.size).toBe(20_000)
    // Capped at 1 GiB of buckets, not 10^12 paths (which would throw: no such ArrayBuffer).
    const huge = new SlugTable()
    huge.reserve(1e12)
    huge.apply(link(1))
    expect(huge.entryOf("/slug1")?.linkId).toBe("link_1")
  })
})

describe("the slug table against a plain model", () => {
  it("answers what a map of the latest states answers, through 20,000 random creations, updates, disables and late events", () => {
    // A seeded generator (mulberry32): the same sequence on every run.
    let seed = 0x5eed
    const random = () => {
      seed = (seed + 0x6d2b79f5) | 0
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296
    }
    const pick = (n: number) => Math.floor(random() * n)
    // A small compaction threshold and first sizes: moves, resizes, index growth and
    // compactions all happen many times over.
    const table = new SlugTable(2048)
    const model = new Map<string, LinkState>()
    const versions = new Map<string, number>()
    for (let step = 0; step < 20_000; step++) {
      const n = pick(1500)
      const slug = `s${n}x`
      const held = versions.get(slug)
      // Mostly newer states, sometimes one older than held (a late event), sometimes equal.
      const updatedAt = held === undefined ? 1 + pick(10) : held + [-1 - pick(3), 0, 1 + pick(5)][pick(3)]!
      const state: LinkState = {
        id: `link_${n}`,
        accountId: `acc_${n % 7}`,
        slug,
        destinationUrl: `https://e.com/${"p".repeat(pick(120))}/${n}`,
        active: random() > 0.15,
        utm: random() > 0.8 ? { utm_source: "s".repeat(pick(40)) } : null,
        expiresAt: random() > 0.9 ? 1_000_000 + pick(1000) : null,
        updatedAt
      }
      const applied = table.apply(state)
      expect(applied).toBe(held === undefined || updatedAt >= held)
      if (applied) {
        model.set(slug, state)
        versions.set(slug, updatedAt)
      }
    }
    let active = 0
    for (const [slug, state] of model) {
      const entry = table.entryOf(`/${slug}`)
      if (!state.active) {
        expect(entry).toBeUndefined()
        continue
      }
      active++
      const utm = state.utm === null ? "" : `?utm_source=${state.utm.utm_source}`
      expect(entry).toEqual({
        location: `${state.destinationUrl}${utm}`,
        linkId: state.id,
        accountId: state.accountId,
        expiresAt: state.expiresAt ?? Number.POSITIVE_INFINITY
      })
    }
    expect(table.size).toBe(active)
    expect(table.rowCount).toBe(model.size)
    // Compactions kept the arena near the records in use (each at most 8 + 10 + 216 bytes:
    // path, link id, Location, and only those too long for a bucket): without them it takes far more.
    expect(table.arenaBytes).toBeLessThan(model.size * 274)
  })
})
