import { readdirSync, readFileSync } from "node:fs"
import { Effect, ManagedRuntime } from "effect"
import sharp from "sharp"
import { afterAll, describe, expect, it } from "vitest"
import { ANIMATED_WEBP_MAX_FRAMES, MAX_FRAMES } from "../../domain/ImageFormat.js"
import { Codec, type ConvertError, type ConvertedImage, isTransient } from "../../domain/ports/Codec.js"
import { codecLayer } from "../../infra/codec/ImageCodec.js"
import {
  animatedGif,
  animatedWebpWithMetadata,
  handmadeGif,
  jpeg,
  jpegWithOrientation6,
  pngBomb,
  pngWithAlpha,
  SECRET,
  svg,
  tiff,
  uniformGif,
  webpWithMetadata,
  webpWithOrientation6,
  widePng,
  zipArchive
} from "../fixtures/images/make.js"
import { waitFor } from "../support/waitFor.js"

const MiB = 1024 * 1024

let noise: Promise<Buffer> | undefined
/** 36 million pixels of noise: far more than a second of encoding at effort 4 anywhere. */
const bigNoiseJpeg = () => {
  noise ??= jpeg(6000, 6000)
  return noise
}

const main = ManagedRuntime.make(codecLayer({ concurrency: 1 }))
afterAll(() => main.dispose())

const convert = (bytes: Uint8Array, tier: "normal" | "fast" = "normal", runtime = main) =>
  runtime.runPromise(Effect.flatMap(Codec, (c) => c.convert(bytes, { tier })))
const convertError = (bytes: Uint8Array, runtime = main): Promise<ConvertError> =>
  runtime.runPromise(Effect.flip(Effect.flatMap(Codec, (c) => c.convert(bytes))))
const probe = (bytes: Uint8Array) => main.runPromise(Effect.flatMap(Codec, (c) => c.probe(bytes)))
const probeError = (bytes: Uint8Array) => main.runPromise(Effect.flip(Effect.flatMap(Codec, (c) => c.probe(bytes))))

const metadataOf = (out: ConvertedImage) => sharp(out.bytes).metadata()
const contains = (haystack: Uint8Array, needle: string | Buffer) => Buffer.from(haystack).includes(needle)

const expectNoPrivateMetadata = async (out: ConvertedImage) => {
  const meta = await metadataOf(out)
  expect(meta.exif).toBeUndefined()
  expect(meta.xmp).toBeUndefined()
  expect(meta.iptc).toBeUndefined()
  expect(meta.icc).toBeUndefined()
  expect(meta.orientation).toBeUndefined()
  expect(contains(out.bytes, SECRET)).toBe(false)
}

/** The converter processes this test process started (Linux: read from /proc). */
const converterProcesses = () =>
  readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .flatMap((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8")
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        const ppid = Number(fields[1])
        const nice = Number(fields[16])
        return cmdline.includes("ConverterProcess.ts") && ppid === process.pid ? [{ pid: Number(pid), nice }] : []
      } catch {
        return []
      }
    })

describe("conversion to WebP", () => {
  it("applies EXIF orientation 6 (stored 300 × 200 becomes 200 × 300, turned clockwise) and removes EXIF, GPS, XMP and the ICC profile", async () => {
    const input = await jpegWithOrientation6()
    const inMeta = await sharp(input).metadata()
    expect([inMeta.orientation, inMeta.exif !== undefined, inMeta.xmp !== undefined, inMeta.hasProfile]).toEqual([
      6,
      true,
      true,
      true
    ])
    const out = await convert(input)
    expect(out).toMatchObject({ format: "webp", mime_type: "image/webp", width: 200, height: 300, frames: 1 })
    expect(out.animated).toBe(false)
    await expectNoPrivateMetadata(out)
    const { data, info } = await sharp(out.bytes).raw().toBuffer({ resolveWithObject: true })
    const at = (x: number, y: number) =>
      Array.from(data.subarray((y * info.width + x) * 3, (y * info.width + x) * 3 + 3))
    // Clockwise: the stored left (red) half is now on top, the right (blue) half below.
    expect(at(100, 20)[0]).toBeGreaterThan(200)
    expect(at(100, 280)[2]).toBeGreaterThan(200)
  })

  it("keeps a PNG's transparency in the WebP", async () => {
    const out = await convert(await pngWithAlpha())
    expect(out).toMatchObject({ format: "webp", width: 64, height: 64 })
    const meta = await metadataOf(out)
    expect(meta.hasAlpha).toBe(true)
    const { data } = await sharp(out.bytes).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
    expect(data[(10 * 64 + 5) * 4 + 3]).toBeLessThan(10)
    expect(data[(10 * 64 + 60) * 4 + 3]).toBeGreaterThan(245)
  })

  it("turns a small animated GIF into an animated WebP with the same frames, size, delays and looping", async () => {
    const out = await convert(await animatedGif(3))
    expect(out).toMatchObject({
      format: "webp",
      mime_type: "image/webp",
      width: 64,
      height: 48,
      frames: 3,
      animated: true
    })
    const meta = await metadataOf(out)
    expect(meta.pages).toBe(3)
    expect(meta.delay).toEqual([100, 100, 100])
    expect(meta.loop).toBe(0)
  })

  it("keeps an uploaded WebP's own picture data, with EXIF and XMP removed", async () => {
    const input = await webpWithMetadata()
    const inMeta = await sharp(input).metadata()
    expect(inMeta.exif !== undefined && inMeta.xmp !== undefined).toBe(true)
    const out = await convert(input)
    expect(out).toMatchObject({ format: "webp", width: 120, height: 80, frames: 1 })
    await expectNoPrivateMetadata(out)
    expect(out.bytes.length).toBeLessThan(input.length)
    const pixels = (b: Uint8Array) => sharp(b).raw().toBuffer()
    expect(Buffer.compare(await pixels(out.bytes), await pixels(input))).toBe(0)
  })

  it("re-encodes a WebP whose EXIF orientation is 6 or that carries an ICC profile: turned, converted to sRGB, no metadata", async () => {
    const out = await convert(await webpWithOrientation6())
    expect(out).toMatchObject({ format: "webp", width: 200, height: 300 })
    await expectNoPrivateMetadata(out)
  })

  it("keeps an animated WebP's frames, with EXIF and XMP removed", async () => {
    const out = await convert(await animatedWebpWithMetadata())
    expect(out).toMatchObject({ format: "webp", width: 64, height: 48, frames: 3, animated: true })
    await expectNoPrivateMetadata(out)
  })

  it("scales a 20000 × 100 PNG proportionally so that its longer side is 16383 px", async () => {
    const out = await convert(await widePng())
    expect(out.width).toBe(16383)
    expect(Math.abs(out.height - (100 * 16383) / 20000)).toBeLessThanOrEqual(1)
  })

  it("gives the same dimensions and frames at the fast tier", async () => {
    const out = await convert(await animatedGif(3), "fast")
    expect(out).toMatchObject({ format: "webp", width: 64, height: 48, frames: 3 })
  })

  it("keeps a large animation as GIF: its frames and size, without the comment and the foreign application extension", async () => {
    // 2000 × 2000 × 10 frames is beyond the animated-WebP budget (32 Mi frame pixels).
    const input = handmadeGif({
      width: 2000,
      height: 2000,
      frames: 10,
      comment: SECRET,
      applicationData: { id: "XMP DataXMP", data: SECRET }
    })
    const out = await convert(input)
    expect(out).toMatchObject({ format: "gif", mime_type: "image/gif", width: 2000, height: 2000, frames: 10 })
    expect(contains(out.bytes, SECRET)).toBe(false)
    expect(contains(out.bytes, "NETSCAPE2.0")).toBe(true)
    expect((await metadataOf(out)).pages).toBe(10)
  })

  it("keeps an animation of 5 full 3000 × 3000 frames (45 million frame pixels) as GIF, frames and size unchanged", async () => {
    const out = await convert(uniformGif({ width: 3000, height: 3000, frames: 5 }))
    expect(out).toMatchObject({ format: "gif", width: 3000, height: 3000, frames: 5, animated: true })
  })
})

describe("probe", () => {
  it("reads format, dimensions after orientation, frames and the format a conversion will publish", async () => {
    expect(await probe(await jpegWithOrientation6())).toEqual({
      format: "jpeg",
      width: 200,
      height: 300,
      frames: 1,
      animated: false,
      published: "webp",
      mime_type: "image/webp"
    })
    expect(await probe(await animatedGif(3))).toMatchObject({ format: "gif", frames: 3, published: "webp" })
    expect(await probe(handmadeGif({ width: 2000, height: 2000, frames: 10 }))).toMatchObject({ published: "gif" })
  })

  it("applies no size limit: a decompression bomb's header is read, not refused", async () => {
    expect(await probe(pngBomb())).toMatchObject({ format: "png", width: 100_000, height: 100_000 })
  })
})

describe("hostile files", () => {
  it("refuses a decompression bomb (a few KiB declaring 100000 × 100000) with TooManyPixels before decoding anything", async () => {
    const bomb = pngBomb()
    expect(bomb.length).toBeLessThan(64 * 1024)
    const before = process.memoryUsage().rss
    const error = await convertError(bomb)
    expect(error._tag).toBe("TooManyPixels")
    expect(error.message).toContain("100000 × 100000")
    expect(isTransient(error)).toBe(false)
    expect(process.memoryUsage().rss - before).toBeLessThan(200 * MiB)
  })

  it("refuses a truncated JPEG as CorruptImage with the decoder's reason", async () => {
    const whole = await jpeg(400, 300)
    const error = await convertError(whole.subarray(0, Math.floor(whole.length / 2)))
    expect(error._tag).toBe("CorruptImage")
    expect(error.message).toMatch(/premature end/i)
  })

  it("refuses a truncated large GIF animation (kept-as-GIF path) as CorruptImage", async () => {
    const whole = handmadeGif({ width: 2000, height: 2000, frames: 10 })
    const error = await convertError(whole.subarray(0, whole.length - 20))
    expect(error._tag).toBe("CorruptImage")
  })

  it("refuses a truncated WebP as CorruptImage", async () => {
    const whole = await webpWithMetadata()
    const error = await convertError(whole.subarray(0, Math.floor(whole.length * 0.6)))
    expect(error._tag).toBe("CorruptImage")
  })

  it("turns a polyglot (a valid PNG or JPEG with a ZIP archive appended) into a clean WebP without the archive", async () => {
    const archive = zipArchive("payload.txt", SECRET)
    for (const image of [await pngWithAlpha(), await jpeg(64, 64)]) {
      const out = await convert(Buffer.concat([image, archive]))
      expect(out).toMatchObject({ format: "webp", width: 64, height: 64 })
      expect(contains(out.bytes, SECRET)).toBe(false)
      expect(contains(out.bytes, Buffer.from([0x50, 0x4b, 0x03, 0x04]))).toBe(false)
    }
  })

  it("drops an archive appended to a WebP or to a large GIF that is kept", async () => {
    const archive = zipArchive("payload.txt", SECRET)
    const webp = await convert(Buffer.concat([await webpWithMetadata(), archive]))
    expect(contains(webp.bytes, SECRET)).toBe(false)
    const gif = await convert(Buffer.concat([handmadeGif({ width: 2000, height: 2000, frames: 10 }), archive]))
    expect(gif.format).toBe("gif")
    expect(contains(gif.bytes, SECRET)).toBe(false)
    expect(gif.bytes[gif.bytes.length - 1]).toBe(0x3b)
  })

  it(`keeps a GIF of 5000 one-pixel frames (more than ${ANIMATED_WEBP_MAX_FRAMES}) as a clean GIF no larger than the upload`, async () => {
    const input = handmadeGif({ width: 1, height: 1, frames: 5000, comment: SECRET })
    const out = await convert(input)
    expect(out).toMatchObject({ format: "gif", width: 1, height: 1, frames: 5000 })
    expect(out.bytes.length).toBeLessThan(input.length)
    expect(contains(out.bytes, SECRET)).toBe(false)
  })

  it(`refuses a GIF of more than ${MAX_FRAMES} frames with TooManyFrames`, async () => {
    const error = await convertError(handmadeGif({ width: 1, height: 1, frames: MAX_FRAMES + 1 }))
    expect(error._tag).toBe("TooManyFrames")
    expect(error.message).toContain(String(MAX_FRAMES + 1))
  })

  it("refuses a GIF bomb (1.7 MB of 10 frames of 16000 × 16000) with TooManyPixels before decoding anything", async () => {
    const bomb = uniformGif({ width: 16_000, height: 16_000, frames: 10 })
    const before = process.memoryUsage().rss
    const error = await convertError(bomb)
    expect(error._tag).toBe("TooManyPixels")
    expect(error.message).toContain("16000 × 16000 px × 10 frames")
    expect(process.memoryUsage().rss - before).toBeLessThan(200 * MiB)
  })

  it("refuses SVG, TIFF, plain text, HTML and empty input as NotAnImage, in probe and convert", async () => {
    const inputs: Record<string, Uint8Array> = {
      svg: svg(),
      tiff: await tiff(),
      text: Buffer.from("just some text, sent as image/png"),
      html: Buffer.from('<!doctype html><html><body><img src="x.png"></body></html>'),
      empty: Buffer.alloc(0),
      riffNotWebp: Buffer.from("RIFF\x10\x00\x00\x00WAVEfmt ")
    }
    for (const [name, bytes] of Object.entries(inputs)) {
      expect([name, (await probeError(bytes))._tag]).toEqual([name, "NotAnImage"])
      expect([name, (await convertError(bytes))._tag]).toEqual([name, "NotAnImage"])
    }
  })

  it("refuses a header that starts right but cannot be read as CorruptImage in probe", async () => {
    const error = await probeError(Buffer.concat([Buffer.from("GIF89a"), Buffer.alloc(3, 0xff)]))
    expect(error._tag).toBe("CorruptImage")
  })
})

describe("guards", () => {
  it("refuses a conversion whose estimated memory is above the limit with TooManyPixels naming the memory", async () => {
    const small = ManagedRuntime.make(codecLayer({ memoryLimitBytes: 128 * MiB }))
    try {
      const error = await convertError(await widePng(4000, 4000), small)
      expect(error._tag).toBe("TooManyPixels")
      expect(error.message).toMatch(/MiB/)
    } finally {
      await small.dispose()
    }
  })

  it("stops a converter process that goes past the memory limit (ConversionMemoryExceeded) while the service keeps converting", async () => {
    // Estimated at 102 MiB (so it is let through), it takes more: Node, the TypeScript loader
    // and libvips alone are about 85 MiB resident before the 6 million pixels.
    const tight = ManagedRuntime.make(codecLayer({ memoryLimitBytes: 110 * MiB }))
    try {
      const error = await convertError(await jpeg(2500, 2500), tight)
      expect(error._tag).toBe("ConversionMemoryExceeded")
      expect(isTransient(error)).toBe(false)
    } finally {
      await tight.dispose()
    }
    expect((await convert(await pngWithAlpha())).format).toBe("webp")
  })

  it("stops a conversion that runs past its time (ConversionTimeout, transient) and converts the next image", async () => {
    const hurried = ManagedRuntime.make(codecLayer({ timeoutSeconds: 1 }))
    try {
      const error = await convertError(await bigNoiseJpeg(), hurried)
      expect(error._tag).toBe("ConversionTimeout")
      expect(isTransient(error)).toBe(true)
      expect((await convert(await pngWithAlpha(), "normal", hurried)).format).toBe("webp")
    } finally {
      await hurried.dispose()
    }
  })

  it.skipIf(process.platform !== "linux")(
    "runs conversions in a child process at the configured lower OS priority (nice 10 by default)",
    async () => {
      await convert(await pngWithAlpha())
      const children = converterProcesses()
      expect(children.length).toBeGreaterThanOrEqual(1)
      for (const child of children) expect(child.nice).toBe(10)
    }
  )

  it.skipIf(process.platform !== "linux")(
    "reports a converter process that dies mid-conversion as CodecUnavailable (transient) and starts a new one",
    async () => {
      await convert(await pngWithAlpha())
      let settled = false
      const pending = convertError(await bigNoiseJpeg()).finally(() => {
        settled = true
      })
      // Every converter process that shows up is killed, until the conversion gives up.
      await waitFor(
        () => {
          if (settled) return true
          for (const child of converterProcesses()) process.kill(child.pid, "SIGKILL")
          return false
        },
        { intervalMs: 100, message: "the conversion to end with its converter killed" }
      )
      const error = await pending
      expect(error._tag).toBe("CodecUnavailable")
      expect(isTransient(error)).toBe(true)
      expect((await convert(await pngWithAlpha())).format).toBe("webp")
    }
  )
})
