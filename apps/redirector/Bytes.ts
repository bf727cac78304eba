/**
 * Short byte strings (ids: visible ASCII, tens of bytes) moved and scanned four bytes at a
 * time through DataViews, where V8's byte loops over typed arrays take ~1.5 ns a byte: a
 * click on another link than the last copies its run entry (SlugTable.writeRun), and the
 * flusher copies its link id into the event's JSON (ClickGroup.linkIndex). Where a length is
 * not a multiple of four, the last four bytes are read (and written) again; nothing outside
 * the `n` bytes is read or written.
 */

/** All of `b` as a DataView. */
export const viewOf = (b: Buffer): DataView => new DataView(b.buffer, b.byteOffset, b.length)

/** `n` bytes at `fromAt` of `from` to `toAt` of `to`. */
export const copyBytes = (from: DataView, fromAt: number, to: DataView, toAt: number, n: number) => {
  if (n < 4) {
    for (let k = 0; k < n; k++) to.setUint8(toAt + k, from.getUint8(fromAt + k))
    return
  }
  const last = n - 4
  for (let k = 0; k < last; k += 4) to.setInt32(toAt + k, from.getInt32(fromAt + k, true), true)
  to.setInt32(toAt + last, from.getInt32(fromAt + last, true), true)
}

/** Not 0 when a byte of `w` (four bytes) is 0 (exact: Bit Twiddling Hacks' haszero). */
const zeroBytes = (w: number) => (w - 0x01010101) & ~w & 0x80808080

/** Not 0 when a byte of the four in `w` is `"` or `\`: one JSON escapes. */
const quoteOrBackslash = (w: number) => zeroBytes(w ^ 0x22222222) | zeroBytes(w ^ 0x5c5c5c5c)

/** Whether one of the `n` bytes at `at` of `view` is `"` or `\`. */
export const hasQuoteOrBackslash = (view: DataView, at: number, n: number): boolean => {
  if (n < 4) {
    for (let k = 0; k < n; k++) {
      const b = view.getUint8(at + k)
      if (b === 0x22 || b === 0x5c) return true
    }
    return false
  }
  const last = n - 4
  let found = quoteOrBackslash(view.getInt32(at + last, true))
  for (let k = 0; k < last; k += 4) found |= quoteOrBackslash(view.getInt32(at + k, true))
  return found !== 0
}
