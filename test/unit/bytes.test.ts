import { describe, expect, it } from "vitest"
import { copyBytes, hasQuoteOrBackslash, viewOf as view } from "../../apps/redirector/Bytes.js"

describe("ids moved and scanned four bytes at a time (Bytes.ts)", () => {
  it("copies exactly n bytes, for every length up to 40 and every alignment, writing nothing around them", () => {
    const source = Buffer.from(Array.from({ length: 64 }, (_, i) => 0x21 + i))
    for (let n = 0; n <= 40; n++) {
      for (const [from, to] of [
        [0, 0],
        [1, 3],
        [3, 1],
        [7, 5],
        [2, 6]
      ] as const) {
        const out = Buffer.alloc(64, 0xee)
        copyBytes(view(source), from, view(out), to, n)
        const expected = Buffer.alloc(64, 0xee)
        source.copy(expected, to, from, from + n)
        expect(out).toEqual(expected)
      }
    }
  })

  it("finds a quote or a backslash at any position of any length, and nothing in ids without one", () => {
    const id = Buffer.from("link_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", "latin1")
    for (let n = 0; n <= id.length; n++) {
      expect(hasQuoteOrBackslash(view(id), 0, n)).toBe(false)
      for (let k = 0; k < n; k++) {
        for (const c of [0x22, 0x5c]) {
          const b = Buffer.from(id)
          b[k] = c
          expect(hasQuoteOrBackslash(view(b), 0, n)).toBe(true)
          // One just past the bytes, or just before them, is not theirs.
          expect(hasQuoteOrBackslash(view(b), 0, k)).toBe(false)
          expect(hasQuoteOrBackslash(view(b), k + 1, Math.min(n, b.length - k - 1))).toBe(false)
        }
      }
    }
    // Bytes next to the two (0x21, 0x23, 0x5b, 0x5d), 0 and high bytes are not taken for them.
    const near = Buffer.from([0x21, 0x23, 0x5b, 0x5d, 0x00, 0x80, 0xa2, 0xdc, 0xff, 0x01, 0x21, 0x23])
    for (let n = 0; n <= near.length; n++) expect(hasQuoteOrBackslash(view(near), 0, n)).toBe(false)
  })
})
