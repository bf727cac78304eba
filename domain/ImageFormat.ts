/**
 * Hosted-image formats and the conversion rules that do not depend on the codec: what an
 * upload is by its bytes (never by its declared type), the limits the converter enforces,
 * and which format a conversion publishes.
 */

export type ImageFormat = "jpeg" | "png" | "gif" | "webp"
export type PublishedFormat = "webp" | "gif"

/** Upload and import file limit (contract: 10485760 bytes, every key). */
export const MAX_IMAGE_BYTES = 10_485_760

/** Declared content types an upload may carry; the bytes still decide. */
export const ACCEPTED_CONTENT_TYPES: ReadonlyArray<string> = ["image/jpeg", "image/png", "image/webp", "image/gif"]

/** The WebP codec's side limit: a longer side is scaled down proportionally to this. */
export const MAX_DIMENSION = 16_383

/**
 * Decoded pixels a conversion may touch: width × height × frames of the input canvas
 * (2^30, about four 16383 × 16383 pictures). Not an admission limit: the contract has none,
 * so an upload beyond it is accepted and its conversion fails for good with a reason. It
 * stops decompression bombs (a few KiB declaring billions of pixels) before any decoding.
 */
export const MAX_TOTAL_PIXELS = 1_073_741_824

/** Frames a conversion may decode; past it the per-frame cost, not pixels, dominates. */
export const MAX_FRAMES = 10_000

/**
 * Animations published as animated WebP. Measured with sharp 0.35 / libwebp 1.6 on the
 * 2-core machines: animated WebP encoding costs about 0.15 to 0.35 s per million frame
 * pixels at effort 4 (plus about 3 ms per frame), while a full validating decode of a GIF
 * costs about 0.01 s per million and re-encoding a GIF with sharp is slower than WebP.
 * So an animated GIF up to 32 Mi frame pixels and 1000 frames (at most about 10 s) becomes
 * animated WebP; a larger one is kept as GIF: its own image data, checked by a full decode,
 * with comments and foreign application extensions (XMP, ICC, IPTC) removed. An animated
 * WebP upload is always kept as WebP.
 */
export const ANIMATED_WEBP_MAX_PIXELS = 33_554_432
export const ANIMATED_WEBP_MAX_FRAMES = 1_000

const startsWith = (bytes: Uint8Array, offset: number, expected: ReadonlyArray<number>): boolean =>
  bytes.length >= offset + expected.length && expected.every((b, i) => bytes[offset + i] === b)

const ascii = (s: string): ReadonlyArray<number> => Array.from(s, (c) => c.charCodeAt(0))

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
const GIF87A = ascii("GIF87a")
const GIF89A = ascii("GIF89a")
const RIFF = ascii("RIFF")
const WEBP = ascii("WEBP")

/** The format the leading bytes prove, or null: a declared content type never counts. */
export const sniffImageFormat = (bytes: Uint8Array): ImageFormat | null => {
  if (startsWith(bytes, 0, [0xff, 0xd8, 0xff])) return "jpeg"
  if (startsWith(bytes, 0, PNG_SIGNATURE)) return "png"
  if (startsWith(bytes, 0, GIF87A) || startsWith(bytes, 0, GIF89A)) return "gif"
  if (startsWith(bytes, 0, RIFF) && startsWith(bytes, 8, WEBP)) return "webp"
  return null
}

export const mimeTypeOf = (format: ImageFormat): string => `image/${format}`

/** Dimensions after proportional scaling to the codec's side limit (unchanged when within it). */
export const fitWithinMaxDimension = (
  width: number,
  height: number
): { readonly width: number; readonly height: number } => {
  const longer = Math.max(width, height)
  if (longer <= MAX_DIMENSION) return { width, height }
  const scale = MAX_DIMENSION / longer
  return {
    width: width >= height ? MAX_DIMENSION : Math.max(1, Math.round(width * scale)),
    height: height > width ? MAX_DIMENSION : Math.max(1, Math.round(height * scale))
  }
}

export interface ImageShape {
  readonly format: ImageFormat
  /** One frame's canvas. */
  readonly width: number
  readonly height: number
  readonly frames: number
}

/** Why an image cannot be converted within the limits, or null. */
export const limitViolation = (
  shape: ImageShape
): { readonly kind: "frames" | "pixels"; readonly detail: string } | null => {
  if (shape.frames > MAX_FRAMES) {
    return { kind: "frames", detail: `${shape.frames} frames, more than the ${MAX_FRAMES} a conversion decodes` }
  }
  const pixels = shape.width * shape.height * shape.frames
  if (pixels > MAX_TOTAL_PIXELS) {
    const frames = shape.frames > 1 ? ` × ${shape.frames} frames` : ""
    return {
      kind: "pixels",
      detail: `${shape.width} × ${shape.height} px${frames} is more than the ${MAX_TOTAL_PIXELS} pixels a conversion decodes`
    }
  }
  return null
}

/**
 * The published format: WebP, except an animated GIF beyond the animated-WebP budget that
 * needs no scaling, which stays GIF (see ANIMATED_WEBP_MAX_PIXELS).
 */
export const publishedFormat = (shape: ImageShape): PublishedFormat => {
  if (shape.format !== "gif" || shape.frames <= 1) return "webp"
  if (Math.max(shape.width, shape.height) > MAX_DIMENSION) return "webp"
  const withinBudget =
    shape.frames <= ANIMATED_WEBP_MAX_FRAMES && shape.width * shape.height * shape.frames <= ANIMATED_WEBP_MAX_PIXELS
  return withinBudget ? "webp" : "gif"
}
