/**
 * A micro-benchmark of the flusher's share of click capture, per click: a round's raw clicks
 * to clicks.recorded events (apps/redirector/Clicks.ts, convertFirstRound and emit) and the
 * publish call (to an event log that only counts), for BENCH_CLICKS clicks (default 400000)
 * of one account on one link, then on a random link among the first thousand (another link
 * each click, their records in the cache), then on a random link of a million. Prints the CPU per click,
 * the events made and their size.
 *
 *   node --import tsx bench/click-convert.ts
 */
import { Effect, Layer, Logger, LogLevel } from "effect"
import { makeClickCapture } from "../apps/redirector/Clicks.js"
import { EventLog, type OutgoingRecord } from "../domain/EventLog.js"
import { scaleTable } from "./scale-links.js"

const CLICKS = Number(process.env.BENCH_CLICKS ?? 400_000)
const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
const peers = Array.from({ length: 256 }, (_, i) => Uint8Array.of(192, 0, 2, i).buffer)
const secrets = { get: () => Effect.succeed(new Uint8Array(32)) }

// A million links, as the slug table holds them.
const table = scaleTable(1_000_000)

const run = async (linkOf: (i: number) => number) => {
  const rows = Int32Array.from({ length: CLICKS }, (_, i) => table.rowOf(`/s${linkOf(i)}`))
  let events = 0
  let chars = 0
  const log = Layer.succeed(EventLog, {
    publish: (_topic: string, records: ReadonlyArray<OutgoingRecord>) =>
      Effect.sync(() => {
        events += records.length
        for (const r of records) chars += r.value.length
      })
  } as unknown as EventLog["Type"])
  const cpu = process.cpuUsage()
  await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const buffer = yield* makeClickCapture(secrets as never, {
          intervalMs: 60_000,
          batchSize: 10_000,
          maxBuffered: CLICKS
        })
        for (let i = 0; i < CLICKS; i++) {
          buffer.record(table, rows[i]!, 1_700_000_000_000 + (i >> 4), peers[i & 255]!, `${UA}`, "", "")
        }
      })
    ).pipe(Effect.provide(log), Effect.provide(Logger.minimumLogLevel(LogLevel.None)))
  )
  const used = process.cpuUsage(cpu)
  return { events, mb: +(chars / 1e6).toFixed(1), us: +((used.user + used.system) / CLICKS).toFixed(2) }
}

for (const [name, linkOf] of [
  ["one link", () => 1],
  ["random link of the first 1,000", () => 1 + Math.floor(Math.random() * 1_000)],
  ["random link of 1,000,000", () => 1 + Math.floor(Math.random() * 1_000_000)]
] as const) {
  const r = await run(linkOf)
  console.log(`${name}: ${r.us} us CPU a click (record, convert, publish), ${r.events} events, ${r.mb} MB`)
}
