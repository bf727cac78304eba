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

/** 320 × 240, 30 frames: a box moving over a gradient. */
export const makeGif = () => {
  const width = 320
  const height = 240
  const frames = 30
  const raw = Buffer.alloc(width * height * frames * 3)
  for (let f = 0; f < frames; f++) {
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const o = ((f * height + y) * width + x) * 3
        const box = Math.abs(x - (f * 9 + 40)) < 30 && Math.abs(y - (f * 5 + 50)) < 30
        raw[o] = box ? 250 : (x * 255) / width
        raw[o + 1] = box ? 40 : (y * 255) / height
        raw[o + 2] = box ? 40 : 128
      }
    }
  }
  return sharp(raw, { raw: { width, height: height * frames, channels: 3, pageHeight: height } })
    .gif({ delay: Array(frames).fill(40), loop: 0 })
    .toBuffer()
}
