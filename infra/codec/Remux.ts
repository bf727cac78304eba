/**
 * Container-level rewriting for images that are kept in their own coding (an uploaded WebP,
 * a large animated GIF): only the picture data is copied; metadata, unknown chunks and
 * anything after the container's end are dropped. The result is then checked by a full
 * decode before it is published, so these parsers only have to be strict, not complete.
 */

export class MalformedContainer extends Error {
  override readonly name = "MalformedContainer"
}

const fourcc = (bytes: Uint8Array, at: number): string => String.fromCharCode(...bytes.subarray(at, at + 4))

const u32le = (bytes: Uint8Array, at: number): number =>
  (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0

interface Chunk {
  readonly id: string
  readonly data: Uint8Array
}

const readChunks = (bytes: Uint8Array, start: number, end: number): Array<Chunk> => {
  const chunks: Array<Chunk> = []
  let pos = start
  while (pos < end) {
    if (pos + 8 > end) throw new MalformedContainer("WebP chunk header runs past the RIFF end")
    const size = u32le(bytes, pos + 4)
    const dataEnd = pos + 8 + size
    if (dataEnd > end) throw new MalformedContainer(`WebP chunk ${fourcc(bytes, pos)} runs past the RIFF end`)
    chunks.push({ id: fourcc(bytes, pos), data: bytes.subarray(pos + 8, dataEnd) })
    // Chunks are padded to even sizes; a missing pad byte on the last chunk is tolerated.
    pos = dataEnd + (size & 1)
  }
  return chunks
}

const chunkBytes = (id: string, data: Uint8Array): Uint8Array => {
  const out = new Uint8Array(8 + data.length + (data.length & 1))
  out.set(
    Array.from(id, (c) => c.charCodeAt(0)),
    0
  )
  new DataView(out.buffer).setUint32(4, data.length, true)
  out.set(data, 8)
  return out
}

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

const FRAME_CHUNKS = new Set(["ALPH", "VP8 ", "VP8L"])
const VP8X_ICC = 0x20
const VP8X_EXIF = 0x08
const VP8X_XMP = 0x04

/**
 * A WebP with only its bitstream chunks (VP8X, ANIM, ANMF, ALPH, VP8, VP8L): no ICCP, EXIF,
 * XMP or unknown chunks, nothing after the RIFF end.
 */
export const stripWebpMetadata = (bytes: Uint8Array): Uint8Array => {
  if (bytes.length < 20 || fourcc(bytes, 0) !== "RIFF" || fourcc(bytes, 8) !== "WEBP") {
    throw new MalformedContainer("not a RIFF WebP container")
  }
  const end = 8 + u32le(bytes, 4)
  if (end > bytes.length) throw new MalformedContainer("WebP is truncated: the RIFF size runs past the data")
  const chunks = readChunks(bytes, 12, end)
  const first = chunks[0]
  let kept: Array<Uint8Array>
  if (first === undefined) throw new MalformedContainer("WebP has no chunks")
  if (first.id === "VP8 " || first.id === "VP8L") {
    kept = [chunkBytes(first.id, first.data)]
  } else if (first.id === "VP8X") {
    if (first.data.length < 10) throw new MalformedContainer("WebP VP8X chunk is too short")
    const vp8x = Uint8Array.from(first.data.subarray(0, 10))
    vp8x[0] = vp8x[0]! & ~(VP8X_ICC | VP8X_EXIF | VP8X_XMP)
    kept = [chunkBytes("VP8X", vp8x)]
    for (const chunk of chunks.slice(1)) {
      if (chunk.id === "ANIM" || FRAME_CHUNKS.has(chunk.id)) {
        kept.push(chunkBytes(chunk.id, chunk.data))
      } else if (chunk.id === "ANMF") {
        if (chunk.data.length < 16) throw new MalformedContainer("WebP ANMF chunk is too short")
        const frame = readChunks(chunk.data, 16, chunk.data.length)
          .filter((c) => FRAME_CHUNKS.has(c.id))
          .map((c) => chunkBytes(c.id, c.data))
        kept.push(chunkBytes("ANMF", concat([chunk.data.subarray(0, 16), ...frame])))
      }
    }
  } else {
    throw new MalformedContainer(`WebP starts with an unknown chunk ${JSON.stringify(first.id)}`)
  }
  const body = concat(kept)
  const header = new Uint8Array(12)
  header.set(bytes.subarray(0, 4), 0)
  new DataView(header.buffer).setUint32(4, 4 + body.length, true)
  header.set(bytes.subarray(8, 12), 8)
  return concat([header, body])
}

const LOOP_EXTENSIONS = new Set(["NETSCAPE2.0", "ANIMEXTS1.0"])

/**
 * A GIF with only its picture data: header, screen descriptor, colour tables, graphic control
 * extensions, images and the looping extension. Comments, plain-text blocks (with their
 * graphic control extension), foreign application extensions (XMP, ICC, IPTC) and anything
 * after the trailer are dropped.
 */
export const stripGifMetadata = (bytes: Uint8Array): Uint8Array => {
  const need = (end: number, what: string) => {
    if (end > bytes.length) throw new MalformedContainer(`GIF is truncated in ${what}`)
  }
  // Returns the offset just past a sequence of data sub-blocks and its terminator.
  const skipSubBlocks = (at: number, what: string): number => {
    let pos = at
    for (;;) {
      need(pos + 1, what)
      const size = bytes[pos]!
      pos += 1 + size
      if (size === 0) return pos
      need(pos, what)
    }
  }
  need(13, "the header")
  const version = fourcc(bytes, 0) + String.fromCharCode(bytes[4]!, bytes[5]!)
  if (version !== "GIF87a" && version !== "GIF89a") throw new MalformedContainer("not a GIF")
  const screenFlags = bytes[10]!
  let pos = 13 + (screenFlags & 0x80 ? 3 * 2 ** ((screenFlags & 7) + 1) : 0)
  need(pos, "the global colour table")
  const out: Array<Uint8Array> = [bytes.subarray(0, pos)]
  let pendingControl: Uint8Array | null = null
  for (;;) {
    need(pos + 1, "the block list (no trailer)")
    const start = pos
    const introducer = bytes[pos]!
    if (introducer === 0x3b) {
      out.push(bytes.subarray(pos, pos + 1))
      return concat(out)
    }
    if (introducer === 0x2c) {
      need(pos + 10, "an image descriptor")
      const flags = bytes[pos + 9]!
      pos += 10 + (flags & 0x80 ? 3 * 2 ** ((flags & 7) + 1) : 0)
      need(pos + 1, "a local colour table")
      pos = skipSubBlocks(pos + 1, "image data")
      if (pendingControl) out.push(pendingControl)
      pendingControl = null
      out.push(bytes.subarray(start, pos))
    } else if (introducer === 0x21) {
      need(pos + 2, "an extension")
      const label = bytes[pos + 1]!
      pos = skipSubBlocks(pos + 2, "an extension")
      const block = bytes.subarray(start, pos)
      if (label === 0xf9) {
        pendingControl = block
      } else if (label === 0x01) {
        pendingControl = null
      } else if (label === 0xff && block[2] === 11 && block.length >= 14) {
        const id = String.fromCharCode(...block.subarray(3, 14))
        if (LOOP_EXTENSIONS.has(id)) out.push(block)
      }
    } else {
      throw new MalformedContainer(`GIF has an unknown block 0x${introducer.toString(16)} at byte ${pos}`)
    }
  }
}
