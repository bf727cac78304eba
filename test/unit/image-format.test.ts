import { describe, expect, it } from "vitest"
import {
  ANIMATED_WEBP_MAX_FRAMES,
  ANIMATED_WEBP_MAX_PIXELS,
  fitWithinMaxDimension,
  limitViolation,
  MAX_FRAMES,
  MAX_TOTAL_PIXELS,
  mimeTypeOf,
  publishedFormat,
  sniffImageFormat
} from "../../domain/ImageFormat.js"

const bytes = (...parts: Array<string | ReadonlyArray<number>>) =>
  Uint8Array.from(parts.flatMap((p) => (typeof p === "string" ? Array.from(p, (c) => c.charCodeAt(0)) : p)))

describe("sniffImageFormat: the bytes decide, never the declared type", () => {
  it("recognises JPEG (FF D8 FF), PNG (its 8-byte signature), GIF87a, GIF89a and RIFF....WEBP", () => {
    expect(sniffImageFormat(bytes([0xff, 0xd8, 0xff, 0xe0]))).toBe("jpeg")
    expect(sniffImageFormat(bytes([0xff, 0xd8, 0xff]))).toBe("jpeg")
    expect(sniffImageFormat(bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]))).toBe("png")
    expect(sniffImageFormat(bytes("GIF87a", [1, 0]))).toBe("gif")
    expect(sniffImageFormat(bytes("GIF89a"))).toBe("gif")
    expect(sniffImageFormat(bytes("RIFF", [0x24, 0, 0, 0], "WEBPVP8 "))).toBe("webp")
  })

  it("rejects near misses: a short or altered signature, another RIFF type, GIF88a", () => {
    for (const near of [
      bytes([0xff, 0xd8]),
      bytes([0xff, 0xd8, 0xfe]),
      bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a]),
      bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0b]),
      bytes("GIF88a"),
      bytes("GIF8"),
      bytes("RIFF", [0x24, 0, 0, 0], "WAVE"),
      bytes("RIFF", [0x24, 0, 0, 0], "WEB"),
      bytes("WEBP")
    ]) {
      expect(sniffImageFormat(near)).toBeNull()
    }
  })

  it("rejects empty input, text, HTML, SVG, TIFF, PDF and ZIP", () => {
    for (const other of [
      bytes(),
      bytes("hello"),
      bytes("<!doctype html><img src=x.png>"),
      bytes('<svg xmlns="http://www.w3.org/2000/svg"/>'),
      bytes('<?xml version="1.0"?><svg/>'),
      bytes("II*\0"),
      bytes("MM\0*"),
      bytes("%PDF-1.7"),
      bytes("PK", [3, 4])
    ]) {
      expect(sniffImageFormat(other)).toBeNull()
    }
  })

  it("only looks at the start: a ZIP with a PNG inside is not a PNG, a PNG with a ZIP after it is", () => {
    const png = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
    expect(sniffImageFormat(bytes("PK", [3, 4], png))).toBeNull()
    expect(sniffImageFormat(bytes(png, "PK", [3, 4]))).toBe("png")
  })

  it("names the media type of each format", () => {
    expect(["jpeg", "png", "gif", "webp"].map((f) => mimeTypeOf(f as "jpeg"))).toEqual([
      "image/jpeg",
      "image/png",
      "image/gif",
      "image/webp"
    ])
  })
})

describe("fitWithinMaxDimension: proportional scaling to the 16383-px side limit", () => {
  it("leaves images up to 16383 px per side unchanged", () => {
    expect(fitWithinMaxDimension(16383, 16383)).toEqual({ width: 16383, height: 16383 })
    expect(fitWithinMaxDimension(1, 16383)).toEqual({ width: 1, height: 16383 })
  })

  it("scales the longer side to 16383 and the other in proportion, never below 1 px", () => {
    expect(fitWithinMaxDimension(20000, 100)).toEqual({ width: 16383, height: 82 })
    expect(fitWithinMaxDimension(100, 20000)).toEqual({ width: 82, height: 16383 })
    expect(fitWithinMaxDimension(32766, 32766)).toEqual({ width: 16383, height: 16383 })
    expect(fitWithinMaxDimension(65535, 1)).toEqual({ width: 16383, height: 1 })
  })
})

describe("limitViolation: the converter's pixel and frame guards", () => {
  it("lets through anything up to the total pixel budget and frame limit", () => {
    expect(limitViolation({ format: "jpeg", width: 30000, height: 30000, frames: 1 })).toBeNull()
    expect(limitViolation({ format: "gif", width: 1, height: 1, frames: MAX_FRAMES })).toBeNull()
  })

  it("counts pixels over every frame and names the numbers", () => {
    const bomb = limitViolation({ format: "png", width: 100_000, height: 100_000, frames: 1 })
    expect(bomb?.kind).toBe("pixels")
    expect(bomb?.detail).toContain("100000 × 100000 px")
    const frames = limitViolation({ format: "gif", width: 16000, height: 16000, frames: 5 })
    expect(frames?.kind).toBe("pixels")
    expect(16000 * 16000 * 5).toBeGreaterThan(MAX_TOTAL_PIXELS)
    expect(frames?.detail).toContain("× 5 frames")
  })

  it("refuses more frames than the limit", () => {
    expect(limitViolation({ format: "gif", width: 1, height: 1, frames: MAX_FRAMES + 1 })?.kind).toBe("frames")
  })
})

describe("publishedFormat: WebP, except large GIF animations, which stay GIF", () => {
  it("publishes every still image and every WebP as WebP", () => {
    for (const format of ["jpeg", "png", "gif", "webp"] as const) {
      expect(publishedFormat({ format, width: 8000, height: 8000, frames: 1 })).toBe("webp")
    }
    expect(publishedFormat({ format: "webp", width: 2000, height: 2000, frames: 5000 })).toBe("webp")
  })

  it("turns animated GIFs within the budget into animated WebP", () => {
    expect(publishedFormat({ format: "gif", width: 480, height: 270, frames: 200 })).toBe("webp")
    const side = Math.floor(Math.sqrt(ANIMATED_WEBP_MAX_PIXELS / 2))
    expect(publishedFormat({ format: "gif", width: side, height: side, frames: 2 })).toBe("webp")
    expect(publishedFormat({ format: "gif", width: 1, height: 1, frames: ANIMATED_WEBP_MAX_FRAMES })).toBe("webp")
  })

  it("keeps an animated GIF beyond the frame-pixel or frame-count budget as GIF", () => {
    expect(publishedFormat({ format: "gif", width: 2000, height: 2000, frames: 10 })).toBe("gif")
    expect(publishedFormat({ format: "gif", width: 1, height: 1, frames: ANIMATED_WEBP_MAX_FRAMES + 1 })).toBe("gif")
  })

  it("still scales (so encodes WebP) a large animation wider than 16383 px", () => {
    expect(publishedFormat({ format: "gif", width: 20000, height: 100, frames: 50 })).toBe("webp")
  })
})
