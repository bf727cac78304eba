/** Benchmark images shared by bench/images-codec.ts and bench/images.ts. */
import { randomBytes } from "node:crypto"
import sharp from "sharp"

export const MiB = 1024 * 1024

/** 4000 × 3000 of gradients plus noise at quality 95, the noise tuned until the file is 9.5 to 10 MiB. */
export const makeJpeg = async () => {
  const width = 4000
  const height = 3000
  const noise = randomBytes(width * height * 3)
  const render = (amplitude: number) => {
    const raw = Buffer.alloc(width * height * 3)
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const o = (y * width + x) * 3
        const n = (c: number) => ((noise[o + c]! - 128) * amplitude) / 128
        raw[o] = Math.max(0, Math.min(255, (x * 255) / width + n(0)))
        raw[o + 1] = Math.max(0, Math.min(255, (y * 255) / height + n(1)))
        raw[o + 2] = Math.max(0, Math.min(255, ((x + y) * 127) / (width + height) + 64 + n(2)))
      }
    }
    return sharp(raw, { raw: { width, height, channels: 3 } })
      .jpeg({ quality: 95 })
      .toBuffer()
  }
  let low = 0
  let high = 128
  let best = await render(64)
  for (let i = 0; i < 12; i++) {
    const amplitude = (low + high) / 2
    const jpeg = await render(amplitude)
    if (jpeg.length >= 9.5 * MiB && jpeg.length <= 10 * MiB) return jpeg
    if (jpeg.length < 9.5 * MiB) low = amplitude
    else high = amplitude
    best = jpeg
  }
  return best
}

/** 640 × 480 with transparency: a screenshot-like picture of flat areas and a gradient. */
export const makePng = () => {
  const width = 640
  const height = 480
  const raw = Buffer.alloc(width * height * 4)
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 4
      const box = x > 100 && x < 400 && y > 80 && y < 300
      raw[o] = box ? 30 : (x * 255) / width
      raw[o + 1] = box ? 144 : 200
      raw[o + 2] = box ? 255 : (y * 255) / height
      raw[o + 3] = y < 40 ? 0 : 255
    }
  }
  return sharp(raw, { raw: { width, height, channels: 4 } })
    .png()
    .toBuffer()
}

/**
 * 480 × 270, 60 frames at 25 fps (a typical short reaction GIF, about 1 to 2 MiB): a
 * photo-like moving scene (gradients, a moving disc, per-frame grain) that the GIF encoder
 * has to dither, so the file has the weight of real footage rather than flat colours.
 */
export const makeGif = () => {
  const width = 480
  const height = 270
  const frames = 60
  const raw = Buffer.alloc(width * height * frames * 3)
  const grain = randomBytes(width * height * frames)
  for (let f = 0; f < frames; f++) {
    const cx = 60 + f * 6
    const cy = 135 + Math.round(60 * Math.sin(f / 6))
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const p = (f * height + y) * width + x
        const o = p * 3
        const n = (grain[p]! - 128) / 8
        const disc = (x - cx) ** 2 + (y - cy) ** 2 < 45 ** 2
        const clamp = (v: number) => Math.max(0, Math.min(255, v + n))
        raw[o] = clamp(disc ? 235 : (x * 255) / width)
        raw[o + 1] = clamp(disc ? 60 + f : (y * 255) / height)
        raw[o + 2] = clamp(disc ? 50 : 96 + 64 * Math.sin((x + f * 4) / 40))
      }
    }
  }
  return sharp(raw, { raw: { width, height: height * frames, channels: 3, pageHeight: height } })
    .gif({ delay: Array(frames).fill(40), loop: 0, effort: 1 })
    .toBuffer()
}
