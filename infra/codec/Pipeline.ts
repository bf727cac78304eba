/**
 * The sharp side of the codec, as plain async functions over plain data so it can run both
 * in the service process (probe: headers only) and in the converter child process (the
 * decode and encode). Failures are returned as `{ _tag, message }` values, never thrown,
 * because they cross a process boundary.
 */
import sharp, { type Metadata } from "sharp"
import {
  fitWithinMaxDimension,
  type ImageFormat,
  MAX_DIMENSION,
  MAX_TOTAL_PIXELS,
  mimeTypeOf,
  type PublishedFormat,
  publishedFormat,
  sniffImageFormat
} from "../../domain/ImageFormat.js"
import type { ConvertedImage, Tier } from "../../domain/ports/Codec.js"
import { MalformedContainer, stripGifMetadata, stripWebpMetadata } from "./Remux.js"

export type { Tier }

/** WebP settings per tier; the retry after a temporary failure uses the fast one. */
export const WEBP_SETTINGS: Readonly<Record<Tier, { readonly quality: number; readonly effort: number }>> = {
  normal: { quality: 80, effort: 4 },
  // Effort 0 fails on very large pictures (VP8 partition 0 overflows at 16383 × 16383); 1 does not.
  fast: { quality: 80, effort: 1 }
}

export type FailureTag =
  | "NotAnImage"
  | "TooManyPixels"
  | "TooManyFrames"
  | "CorruptImage"
  | "ConversionTimeout"
  | "EncodeFailed"

export interface Failure {
  readonly _tag: FailureTag
  readonly message: string
}

export interface Probe {
  readonly format: ImageFormat
  /** As displayed: after EXIF orientation. */
  readonly width: number
  readonly height: number
  readonly frames: number
  readonly animated: boolean
  /** As stored (one frame's canvas). */
  readonly storedWidth: number
  readonly storedHeight: number
  readonly orientation: number
  readonly hasProfile: boolean
}

/**
 * encode: decode, orient, scale, WebP-encode. keep: the upload's own coding with metadata
 * removed, published after a full validating decode.
 */
export type Plan =
  | { readonly kind: "encode"; readonly probe: Probe; readonly scale: boolean }
  | { readonly kind: "keep"; readonly probe: Probe; readonly format: PublishedFormat }

/** What a conversion publishes: the port's ConvertedImage. */
export type Converted = ConvertedImage

export type Outcome<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: Failure }

const ok = <A>(value: A): Outcome<A> => ({ ok: true, value })
const fail = (_tag: FailureTag, message: string): Outcome<never> => ({ ok: false, error: { _tag, message } })

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e)).split("\n")[0]!.trim()

/** libvips reports which operation failed in the message: a *save means the encoder. */
const classify = (e: unknown, during: string): Failure => {
  const message = messageOf(e)
  if (/exceeds pixel limit/i.test(message)) return { _tag: "TooManyPixels", message: `${during}: ${message}` }
  if (/^timeout/i.test(message)) return { _tag: "ConversionTimeout", message: `${during}: ${message}` }
  if (/save\b|unable to encode/i.test(message)) return { _tag: "EncodeFailed", message: `${during}: ${message}` }
  return { _tag: "CorruptImage", message: `${during}: ${message}` }
}

/** Sniffs the bytes, then reads only the headers: no pixel is decoded, whatever they declare. */
export const probeImage = async (bytes: Uint8Array): Promise<Outcome<Probe>> => {
  const format = sniffImageFormat(bytes)
  if (format === null) return fail("NotAnImage", "the bytes are not a JPEG, PNG, GIF or WebP image")
  let meta: Metadata
  try {
    // The header read allocates nothing; convert applies the limits with a clearer message.
    meta = await sharp(bytes, { limitInputPixels: false }).metadata()
  } catch (e) {
    return fail("CorruptImage", `unreadable ${format.toUpperCase()} header: ${messageOf(e)}`)
  }
  if (meta.format !== format) {
    return fail("NotAnImage", `the bytes start like ${format.toUpperCase()} but decode as ${String(meta.format)}`)
  }
  const frames = Math.max(1, meta.pages ?? 1)
  return ok({
    format,
    width: meta.autoOrient?.width ?? meta.width,
    height: meta.autoOrient?.height ?? meta.height,
    frames,
    animated: frames > 1,
    storedWidth: meta.width,
    storedHeight: meta.height,
    orientation: meta.orientation ?? 1,
    hasProfile: meta.hasProfile
  })
}

export const planFor = (probe: Probe): Plan => {
  const scale = Math.max(probe.width, probe.height) > MAX_DIMENSION
  if (probe.format === "webp") {
    const plain = probe.orientation === 1 && !probe.hasProfile
    // Turning or colour-converting a large animation costs a full encode: its frames are kept
    // as they are (the profile is dropped, which leaves the colours read as sRGB).
    const largeAnimation = probe.frames > 1 && publishedFormat({ ...probe, format: "gif" }) === "gif"
    return plain || largeAnimation ? { kind: "keep", probe, format: "webp" } : { kind: "encode", probe, scale }
  }
  if (publishedFormat(probe) === "gif") return { kind: "keep", probe, format: "gif" }
  return { kind: "encode", probe, scale }
}

const MiB = 1024 * 1024

/**
 * Peak resident memory of a conversion child, measured with sharp 0.35 on these machines:
 * about 70 to 90 MiB idle (counted as 64: the per-pixel figures are rounded up); a still
 * WebP encode about 5 bytes per output pixel on top (1.3 GiB for 16383 × 16383); GIF and
 * WebP decoders hold whole canvases (4 bytes per pixel); animated encoding keeps a few
 * canvases per frame size.
 */
export const estimateMemory = (plan: Plan): number => {
  const { probe } = plan
  const canvas = probe.storedWidth * probe.storedHeight
  const wholeCanvasDecoder = probe.format === "gif" || probe.format === "webp"
  const decode = wholeCanvasDecoder ? canvas * 4 * (probe.frames > 1 ? 2 : 1) : 0
  let encode = 0
  if (plan.kind === "encode") {
    const out = fitWithinMaxDimension(probe.width, probe.height)
    encode = out.width * out.height * (probe.frames > 1 ? 24 : 6)
  }
  return 64 * MiB + decode + encode
}

const validate = async (bytes: Uint8Array, timeoutSeconds: number): Promise<Outcome<Metadata>> => {
  try {
    // Decodes every frame in full (the shrink to 8 × 8 happens after), so any damaged image
    // data fails here; nothing large is kept.
    await sharp(bytes, { animated: true, failOn: "truncated", limitInputPixels: MAX_TOTAL_PIXELS })
      .resize({ width: 8, height: 8, fit: "fill", kernel: "nearest" })
      .raw()
      .timeout({ seconds: timeoutSeconds })
      .toBuffer()
    return ok(await sharp(bytes).metadata())
  } catch (e) {
    return { ok: false, error: classify(e, "decode") }
  }
}

const describe = (bytes: Uint8Array, format: PublishedFormat, meta: Metadata): Converted => {
  const frames = Math.max(1, meta.pages ?? 1)
  return {
    bytes,
    format,
    mime_type: mimeTypeOf(format),
    width: meta.width,
    height: meta.height,
    frames,
    animated: frames > 1
  }
}

/** Runs a plan: the decode and encode work, meant for the converter child process. */
export const runPlan = async (
  input: Uint8Array,
  plan: Plan,
  tier: Tier,
  timeoutSeconds: number
): Promise<Outcome<Converted>> => {
  if (plan.kind === "keep") {
    let kept: Uint8Array
    try {
      kept = plan.format === "webp" ? stripWebpMetadata(input) : stripGifMetadata(input)
    } catch (e) {
      if (e instanceof MalformedContainer) return fail("CorruptImage", e.message)
      throw e
    }
    const checked = await validate(kept, timeoutSeconds)
    return checked.ok ? ok(describe(kept, plan.format, checked.value)) : checked
  }
  let output: Buffer
  try {
    let image = sharp(input, {
      animated: plan.probe.frames > 1,
      // Only when there is something to turn: on an animation it costs a quarter more time.
      autoOrient: plan.probe.orientation !== 1,
      failOn: "truncated",
      limitInputPixels: MAX_TOTAL_PIXELS
    })
    if (plan.scale) {
      image = image.resize({ width: MAX_DIMENSION, height: MAX_DIMENSION, fit: "inside", withoutEnlargement: true })
    }
    // No keepMetadata/withMetadata: sharp writes no EXIF, XMP, IPTC or ICC and converts to sRGB.
    output = await image.webp(WEBP_SETTINGS[tier]).timeout({ seconds: timeoutSeconds }).toBuffer()
  } catch (e) {
    return { ok: false, error: classify(e, "convert") }
  }
  try {
    return ok(describe(output, "webp", await sharp(output).metadata()))
  } catch (e) {
    return fail("EncodeFailed", `the encoder's output does not read back: ${messageOf(e)}`)
  }
}
