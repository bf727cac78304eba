import { createHash } from "node:crypto"
import type { HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import * as Multipasta from "multipasta"
import { ACCEPTED_CONTENT_TYPES, MAX_IMAGE_BYTES } from "../../../domain/ImageFormat.js"
import { readBody } from "./BodyReader.js"

/**
 * Image upload bodies (POST /images): raw image bytes, or multipart/form-data with a `file`
 * part. The UploadBody middleware reads and parses them before the idempotency check, so
 * that the fingerprint can be taken from what the request means (not from a multipart
 * boundary), and hands the result to the handler as `CurrentUpload`.
 */

/** Form data a multipart body may carry besides the file (DESIGN: "Multipart"). */
export const MULTIPART_OVERHEAD = 64 * 1024
/** Parts of a multipart body at most; the file and a field or two need far fewer. */
const MAX_PARTS = 16
/** Bytes of one form field (content_rating needs a few). */
const FIELD_LIMIT = 4 * 1024

export interface Upload {
  readonly kind: "raw" | "multipart"
  /** The file. */
  readonly bytes: Uint8Array
  /** The request's Content-Type (raw) or the file part's (multipart); the bytes still decide. */
  readonly declaredType: string
  /** The multipart field `content_rating` as sent, if any: the handler checks it. */
  readonly contentRating: string | undefined
  /** SHA-256 of the file, hex. */
  readonly sha256: string
  /**
   * What the request means beyond method, route and query, for the idempotency fingerprint:
   * raw, the content type and the file's SHA-256; multipart, the fields and the file's
   * SHA-256, so a retry with another boundary is the same request.
   */
  readonly fingerprint: string
}

export type UploadRead =
  | { readonly _tag: "Ok"; readonly upload: Upload }
  /** Past the limit. `unread`: the rest of the body was not read (the connection must close). */
  | { readonly _tag: "TooLarge"; readonly message: string; readonly unread: boolean }
  | { readonly _tag: "Unsupported"; readonly message: string; readonly detail: string }
  | { readonly _tag: "Invalid"; readonly message: string; readonly detail: string }

const ACCEPTED = ACCEPTED_CONTENT_TYPES.join(", ")

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

const tooLarge = (unread: boolean): UploadRead => ({
  _tag: "TooLarge",
  message: `Image files are limited to ${MAX_IMAGE_BYTES} bytes.`,
  unread
})

const invalid = (message: string, detail: string): UploadRead => ({ _tag: "Invalid", message, detail })

const multipartProblem = (error: Multipasta.MultipartError): string => {
  switch (error._tag) {
    case "InvalidBoundary":
      return "Content-Type multipart/form-data needs a boundary parameter"
    case "BadHeaders":
      return "a part's headers are malformed"
    case "InvalidDisposition":
      return "a part's Content-Disposition has no name"
    case "ReachedLimit":
      return error.limit === "MaxParts" ? `more than ${MAX_PARTS} parts` : "a part is too large"
    case "EndNotReached":
      return "the body ends before the closing boundary"
  }
}

interface Part {
  readonly info: Multipasta.PartInfo
  readonly chunks: Array<Uint8Array>
  size: number
  over: boolean
}

/** The parts of a complete multipart body, or why it cannot be taken. */
const parseMultipart = (contentType: string, body: Buffer): UploadRead => {
  const parts: Array<Part> = []
  let problem: string | undefined
  let done = false
  try {
    const parser = Multipasta.make({
      headers: { "content-type": contentType },
      maxParts: MAX_PARTS,
      // Every part is collected the same way, with a cap of its own.
      isFile: () => true,
      onField: () => {},
      onFile: (info) => {
        const part: Part = { info, chunks: [], size: 0, over: false }
        parts.push(part)
        const cap = info.name === "file" ? MAX_IMAGE_BYTES : FIELD_LIMIT
        return (chunk) => {
          if (chunk === null || part.over) return
          part.size += chunk.length
          if (part.size > cap) {
            part.over = true
            part.chunks.length = 0
          } else {
            part.chunks.push(chunk)
          }
        }
      },
      onError: (error) => {
        problem ??= multipartProblem(error)
      },
      onDone: () => {
        done = true
      }
    })
    parser.write(body)
    parser.end()
  } catch {
    // e.g. a filename* parameter with broken percent-encoding
    problem ??= "a part's headers are malformed"
  }
  if (problem === undefined && !done) problem = "the body ends before the closing boundary"
  if (problem !== undefined) return invalid("The multipart body is malformed.", `body: ${problem}`)

  const files = parts.filter((p) => p.info.name === "file")
  if (files.length === 0) {
    return invalid("The multipart body has no file part.", "file: a binary part named 'file' is required")
  }
  if (files.length > 1) return invalid("The multipart body has more than one file part.", "file: send exactly one")
  const file = files[0]!
  if (file.over) return tooLarge(false)
  const ratings = parts.filter((p) => p.info.name === "content_rating")
  if (ratings.length > 1) {
    return invalid("The multipart body repeats a field.", "content_rating: send it at most once")
  }
  let contentRating: string | undefined
  if (ratings[0] !== undefined) {
    const field = ratings[0]
    if (field.over) return invalid("A form field is too long.", "content_rating: must be auto, general or nsfw")
    try {
      contentRating = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(field.chunks))
    } catch {
      return invalid("A form field is not UTF-8 text.", "content_rating: must be auto, general or nsfw")
    }
  }
  const bytes = Buffer.concat(file.chunks, file.size)
  if (bytes.length === 0) return invalid("The upload is empty.", "file: the part has no bytes")
  const hash = sha256(bytes)
  return {
    _tag: "Ok",
    upload: {
      kind: "multipart",
      bytes,
      declaredType: file.info.contentType,
      contentRating,
      sha256: hash,
      fingerprint: `multipart content_rating=${JSON.stringify(contentRating ?? null)} file=${hash}`
    }
  }
}

/**
 * Reads an upload body: raw bytes under one of the accepted image content types, or
 * multipart/form-data. Refuses another content type (415) and a body past the limit (413)
 * before reading it, or as soon as it passes the limit.
 */
export const readUpload = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<UploadRead> =>
  Effect.gen(function* () {
    const contentType = request.headers["content-type"] ?? ""
    const mediaType = contentType.split(";")[0]!.trim().toLowerCase()
    const encoding = (request.headers["content-encoding"] ?? "identity").trim().toLowerCase()
    const raw = ACCEPTED_CONTENT_TYPES.includes(mediaType)
    if (!raw && mediaType !== "multipart/form-data") {
      return {
        _tag: "Unsupported",
        message: `Uploads are raw image bytes (${ACCEPTED}) or multipart/form-data with a 'file' part.`,
        detail: `Content-Type '${mediaType || "(none)"}' is not supported`
      } satisfies UploadRead
    }
    if (encoding !== "identity") {
      return {
        _tag: "Unsupported",
        message: "Uploads are sent without a Content-Encoding.",
        detail: `Content-Encoding '${encoding}' is not supported`
      } satisfies UploadRead
    }
    const limit = raw ? MAX_IMAGE_BYTES : MAX_IMAGE_BYTES + MULTIPART_OVERHEAD
    const declared = Number(request.headers["content-length"] ?? "0")
    if (request.headers["transfer-encoding"] === undefined && declared > limit) return tooLarge(true)
    const read = yield* readBody(request, limit, "stop")
    if (read._tag === "TooLarge") return tooLarge(true)
    if (read._tag === "Aborted") return invalid("The request body ended early.", "body: the upload was cut off")
    if (!raw) return parseMultipart(contentType, read.bytes)
    if (read.bytes.length === 0) return invalid("The upload is empty.", "body: send the image bytes")
    const hash = sha256(read.bytes)
    return {
      _tag: "Ok",
      upload: {
        kind: "raw",
        bytes: read.bytes,
        declaredType: mediaType,
        contentRating: undefined,
        sha256: hash,
        fingerprint: `raw ${mediaType} ${hash}`
      }
    } satisfies UploadRead
  })

const startsWithText = (bytes: Uint8Array, ...prefixes: Array<string>) => {
  const head = Buffer.from(bytes.subarray(0, 512)).toString("latin1").trimStart().toLowerCase()
  return prefixes.some((p) => head.startsWith(p))
}

/** What bytes that are no supported image look like, for an error's detail; undefined when unknown. */
export const describeBytes = (bytes: Uint8Array): string | undefined => {
  const b = Buffer.from(bytes.subarray(0, 16))
  const ascii = (from: number, to: number) => b.subarray(from, to).toString("latin1")
  if (bytes.length === 0) return "empty"
  if (ascii(0, 4) === "II*\0" || ascii(0, 4) === "MM\0*") return "a TIFF image"
  if (startsWithText(bytes, "<!doctype html", "<html", "<head", "<body", "<meta", "<title")) return "an HTML page"
  const markup = Buffer.from(bytes.subarray(0, 4096)).toString("latin1")
  if (
    startsWithText(bytes, "<svg") ||
    (startsWithText(bytes, "<?xml", "<!--", "<!doctype svg") && /<svg/i.test(markup))
  ) {
    return "an SVG image"
  }
  if (startsWithText(bytes, "<")) return "XML or other markup"
  if (ascii(0, 5) === "%PDF-") return "a PDF document"
  if (ascii(0, 4) === "PK\x03\x04") return "a ZIP archive"
  if (ascii(4, 8) === "ftyp") return "an ISO media file (AVIF, HEIC or video)"
  if (ascii(0, 2) === "BM") return "a BMP image"
  if (ascii(0, 4) === "\0\0\x01\0") return "an ICO icon"
  if (startsWithText(bytes, "{", "[")) return "JSON"
  const sample = bytes.subarray(0, 512)
  const printable = sample.filter((c) => c === 9 || c === 10 || c === 13 || (c >= 32 && c !== 127)).length
  if (printable === sample.length) return "text"
  return undefined
}
