/**
 * The codec's cost over bare sharp: for a ~10 MiB JPEG, a small PNG and an animated GIF,
 * the median of 5 runs of `Codec.convert` (header probe, converter child process, metadata
 * stripping, read-back) next to a bare `sharp(input).webp(sameSettings).toBuffer()` in this
 * process, runs alternating. Prints each pair, their ratio, and as its last line one JSON
 * object {"jpeg_ratio","png_ratio","gif_ratio"}. Targets (issue): JPEG at most 1.2, GIF at most 1.3.
 *
 *   node --import tsx bench/images-codec.ts              # the service's default settings
 *   IMAGE_CONVERT_NICE=0 node --import tsx bench/images-codec.ts
 *   node --import tsx bench/images-codec.ts --isolation  # redirector CPU while converting
 *
 * The converter runs at nice 10 by default, so on a machine busy with other work it gets
 * less CPU than the bare baseline: the load average is printed for that reason.
 */
import { spawn } from "node:child_process"
import os from "node:os"
import { Effect, ManagedRuntime } from "effect"
import sharp from "sharp"
import { Codec } from "../domain/ports/Codec.js"
import { CodecLive, codecLayer } from "../infra/codec/ImageCodec.js"
import { WEBP_SETTINGS } from "../infra/codec/Pipeline.js"
import { MiB, makeGif, makeJpeg, makePng } from "./fixtures.js"

const RUNS = 5

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

const time = async (f: () => Promise<unknown>) => {
  const start = performance.now()
  await f()
  return performance.now() - start
}

const ratios = async () => {
  const runtime = ManagedRuntime.make(CodecLive)
  const convert = (bytes: Uint8Array) => runtime.runPromise(Effect.flatMap(Codec, (c) => c.convert(bytes)))
  const settings = WEBP_SETTINGS.normal
  const files = [
    { name: "jpeg", bytes: await makeJpeg(), animated: false },
    { name: "png", bytes: await makePng(), animated: false },
    { name: "gif", bytes: await makeGif(), animated: true }
  ]
  console.log(
    `images-codec: node ${process.version}, ${os.availableParallelism()} cpus, load ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}, IMAGE_CONVERT_NICE=${process.env.IMAGE_CONVERT_NICE ?? "(default 10)"}, ` +
      `webp quality ${settings.quality} effort ${settings.effort}, median of ${RUNS}`
  )
  const result: Record<string, number> = {}
  for (const file of files) {
    const bare = () => sharp(file.bytes, { animated: file.animated }).webp(settings).toBuffer()
    await bare()
    const out = await convert(file.bytes) // also starts the converter process
    const bareMs: Array<number> = []
    const codecMs: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      bareMs.push(await time(bare))
      codecMs.push(await time(() => convert(file.bytes)))
    }
    const ratio = median(codecMs) / median(bareMs)
    result[`${file.name}_ratio`] = Number(ratio.toFixed(3))
    console.log(
      `${file.name.padEnd(4)} ${(file.bytes.length / MiB).toFixed(2).padStart(6)} MiB -> ${out.format} ` +
        `${out.width}x${out.height}${out.frames > 1 ? `x${out.frames}` : ""} ${(out.bytes.length / MiB).toFixed(2)} MiB: ` +
        `codec ${median(codecMs).toFixed(1)} ms, bare sharp ${median(bareMs).toFixed(1)} ms, ratio ${ratio.toFixed(3)}`
    )
  }
  await runtime.dispose()
  console.log(
    JSON.stringify({ jpeg_ratio: result.jpeg_ratio, png_ratio: result.png_ratio, gif_ratio: result.gif_ratio })
  )
}

/**
 * How much CPU a busy single-threaded server (the redirector's event loop, simulated by
 * hashing in 5 ms slices) keeps while animated GIFs convert back to back, all pinned to one
 * core (taskset) so that the server and the converter compete for it: sharp in this process,
 * and the converter child at nice 0, 10 and 19. One-second windows alternate between
 * converting and idle, and the median ratio of the pairs is kept, since the machine is shared.
 */
const isolation = async () => {
  if (process.env.BENCH_PINNED !== "1") {
    const child = spawn("taskset", ["-c", "0", process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
      stdio: "inherit",
      env: { ...process.env, BENCH_PINNED: "1" }
    })
    await new Promise((resolve) => child.on("exit", resolve))
    return
  }
  const PAIRS = 9
  const { createHash } = await import("node:crypto")
  const input = await makeGif()
  sharp.concurrency(1)
  const runtimes = new Map<number, ManagedRuntime.ManagedRuntime<Codec, never>>()
  for (const nice of [0, 10, 19]) {
    const runtime = ManagedRuntime.make(codecLayer({ nice }))
    await runtime.runPromise(Effect.flatMap(Codec, (c) => c.convert(input)))
    runtimes.set(nice, runtime)
  }
  const configs: Array<{ label: string; convert: () => Promise<unknown> }> = [
    {
      label: "sharp in-process",
      convert: () => sharp(input, { animated: true }).webp(WEBP_SETTINGS.normal).toBuffer()
    },
    ...[0, 10, 19].map((nice) => ({
      label: `child nice ${nice}`,
      convert: () => runtimes.get(nice)!.runPromise(Effect.flatMap(Codec, (c) => c.convert(input)))
    }))
  ]
  const serve = (ms: number) =>
    new Promise<number>((resolve) => {
      let count = 0
      const end = performance.now() + ms
      const slice = () => {
        const until = performance.now() + 5
        while (performance.now() < until) {
          createHash("sha256").update("slug").digest()
          count++
        }
        if (performance.now() < end) setImmediate(slice)
        else resolve(count)
      }
      slice()
    })
  console.log(
    `isolation: pinned to one core, ${PAIRS} pairs of 1 s windows per row, load ${os.loadavg()[0]!.toFixed(2)}`
  )
  for (const config of configs) {
    const shares: Array<number> = []
    let conversions = 0
    for (let i = 0; i < PAIRS; i++) {
      const idle = await serve(1000)
      let stopped = false
      const background = (async () => {
        while (!stopped) {
          await config.convert()
          conversions++
        }
      })()
      const busy = await serve(1000)
      stopped = true
      await background
      shares.push(busy / idle)
    }
    console.log(
      `${config.label.padEnd(18)} server keeps ${(100 * median(shares)).toFixed(0).padStart(3)}% of its idle-time throughput ` +
        `(pairs ${shares.map((r) => (100 * r).toFixed(0)).join(" ")}); ${conversions} conversions meanwhile`
    )
  }
  for (const runtime of runtimes.values()) await runtime.dispose()
}

await (process.argv.includes("--isolation") ? isolation() : ratios())
