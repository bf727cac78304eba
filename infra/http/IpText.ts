/** Where the IPv4 address starts in `b` (4 bytes, or IPv4-mapped IPv6); -1 for anything else. */
export const ipv4Offset = (b: Uint8Array): number =>
  b.length === 4
    ? 0
    : b.length === 16 && b[10] === 0xff && b[11] === 0xff && b.subarray(0, 10).every((x) => x === 0)
      ? 12
      : -1

/** An IPv4 address given as a number (a.b.c.d as a * 2^24 + … + d) in dotted form. */
export const ipv4Text = (value: number): string =>
  `${value >>> 24}.${(value >>> 16) & 255}.${(value >>> 8) & 255}.${value & 255}`

/**
 * An address in the text form node:http gives: dotted IPv4 (also for IPv4-mapped IPv6), and
 * RFC 5952 IPv6 (lower case, no leading zeros, the longest run of zero groups as "::").
 */
export const ipText = (b: Uint8Array): string => {
  const o = ipv4Offset(b)
  if (o >= 0) return `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`
  if (b.length !== 16) return ""
  const groups: Array<number> = []
  for (let i = 0; i < 16; i += 2) groups.push((b[i]! << 8) | b[i + 1]!)
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (bestStart < 0) return hex.join(":")
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`
}
