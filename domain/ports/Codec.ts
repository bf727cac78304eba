/**
 * The image codec port: `probe` reads headers, `convert` publishes the bytes (WebP, or the
 * kept GIF/WebP) with their authoritative format and dimensions. The adapter is sharp in
 * niced converter child processes (infra/codec/ImageCodec.ts).
 */
import { Context, Data, type Effect } from "effect"
import type { ImageFormat, PublishedFormat } from "../ImageFormat.js"

/** The bytes are not a JPEG, PNG, GIF or WebP, whatever type was declared (415). */
export class NotAnImage extends Data.TaggedError("NotAnImage")<{ readonly message: string }> {}
/** The header or the image data is damaged or truncated. */
export class CorruptImage extends Data.TaggedError("CorruptImage")<{ readonly message: string }> {}
/** Width × height × frames, or the memory they need, is beyond the converter's limits. */
export class TooManyPixels extends Data.TaggedError("TooManyPixels")<{ readonly message: string }> {}
export class TooManyFrames extends Data.TaggedError("TooManyFrames")<{ readonly message: string }> {}
/** Temporary: the conversion ran out of time; retry with the fast tier. */
export class ConversionTimeout extends Data.TaggedError("ConversionTimeout")<{ readonly message: string }> {}
/** Temporary: the encoder refused the picture at this tier. */
export class EncodeFailed extends Data.TaggedError("EncodeFailed")<{ readonly message: string }> {}
/** The converter went past its memory limit and was stopped. */
export class ConversionMemoryExceeded extends Data.TaggedError("ConversionMemoryExceeded")<{
  readonly message: string
}> {}
/** Temporary: no converter process could be started or it died. */
export class CodecUnavailable extends Data.TaggedError("CodecUnavailable")<{ readonly message: string }> {}

export type ProbeError = NotAnImage | CorruptImage
export type ConvertError =
  | ProbeError
  | TooManyPixels
  | TooManyFrames
  | ConversionTimeout
  | EncodeFailed
  | ConversionMemoryExceeded
  | CodecUnavailable

/** Whether a retry (with the fast tier) can succeed; otherwise the image fails for good. */
export const isTransient = (error: ConvertError): boolean =>
  error._tag === "ConversionTimeout" || error._tag === "EncodeFailed" || error._tag === "CodecUnavailable"

/** The encoder settings of a conversion: `fast` for the retry after a temporary failure. */
export type Tier = "normal" | "fast"

export interface ImageInfo {
  readonly format: ImageFormat
  /** After EXIF orientation; one frame. */
  readonly width: number
  readonly height: number
  readonly frames: number
  readonly animated: boolean
  /** The format and media type a conversion will publish. */
  readonly published: PublishedFormat
  readonly mime_type: string
}

/** The published bytes with their authoritative format and dimensions. */
export interface ConvertedImage {
  readonly bytes: Uint8Array
  readonly format: PublishedFormat
  readonly mime_type: string
  readonly width: number
  readonly height: number
  readonly frames: number
  readonly animated: boolean
}

export interface CodecShape {
  /**
   * Sniffs the bytes and reads the headers only: fails with NotAnImage or CorruptImage.
   * Applies no size limit (the contract has no admission limit on pixels or frames).
   */
  readonly probe: (bytes: Uint8Array) => Effect.Effect<ImageInfo, ProbeError>
  readonly convert: (
    bytes: Uint8Array,
    options?: { readonly tier?: Tier }
  ) => Effect.Effect<ConvertedImage, ConvertError>
}

export class Codec extends Context.Tag("Codec")<Codec, CodecShape>() {}
