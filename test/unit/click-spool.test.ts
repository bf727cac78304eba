import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { threadId } from "node:worker_threads"
import * as zlib from "node:zlib"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { ClickBuffer } from "../../apps/redirector/ClickRound.js"
import { ClickSpool, readSegment, SPOOL_BATCH } from "../../apps/redirector/ClickSpool.js"
import { makeClickCapture } from "../../apps/redirector/Clicks.js"
import { spoolIncarnation } from "../../apps/redirector/SpoolOwner.js"
import { EventLog, type OutgoingRecord } from "../../domain/EventLog.js"
import { clickLinksOf, clickOn } from "../support/clickLinks.js"
import { waitForEffect } from "../support/waitFor.js"

const CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
const linkX = { location: "https://e.com/", linkId: "link_x", accountId: "acc_x", expiresAt: Infinity }
const linkY = { location: "https://e.com/y", linkId: "link_y", accountId: "acc_y", expiresAt: Infinity }
const secrets = { get: () => Effect.succeed(new Uint8Array(32)) }
const quiet = Logger.minimumLogLevel(LogLevel.None)
const v4 = (a: number, b: number, c: number, d: number) => Uint8Array.of(a, b, c, d).buffer

let dir: string
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(process.cwd(), ".tmp-spool-"))
})
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true })
})

const files = (d = dir) => fs.readdirSync(d).filter((n) => n.endsWith(".clicks"))

/** An event log that keeps what it is given; `onPublish` runs before it acknowledges. */
const recordingLog = (onPublish: () => void = () => {}) => {
  const published: Array<OutgoingRecord> = []
  const layer = Layer.succeed(EventLog, {
    publish: (_topic: string, records: ReadonlyArray<OutgoingRecord>) =>
      Effect.sync(() => {
        onPublish()
        published.push(...records)
      })
  } as unknown as EventLog["Type"])
  return { layer, published }
}
const clicksIn = (records: ReadonlyArray<OutgoingRecord>) =>
  records.reduce((n, r) => n + (JSON.parse(r.value).data.at as Array<number>).length, 0)

describe("click spool", () => {
  it("a round written in several steps reads back click for click, values and links included", () => {
    const spool = new ClickSpool(dir, 60_000)
    const buffer = new ClickBuffer(1_000, 1_000)
    spool.attach(buffer)
    const t0 = 1_700_000_000_000
    buffer.record(...clickOn(linkX), t0, v4(192, 0, 2, 1), CHROME, "", "")
    buffer.record(...clickOn(linkY), t0 + 1, "2001:db8::1", "curl/8", "https://a.example/x", "FR")
    expect(spool.write(buffer.current)).toBe(true)
    expect(spool.write(buffer.current)).toBe(false)
    // The same IPv4 peer as a number (uWebSockets.js with the peer-address library): the same value.
    buffer.record(...clickOn(linkX), t0 + 2, 192 * 2 ** 24 + 2 * 256 + 1, CHROME, "https://a.example/x", "")
    expect(buffer.current.peerValues.values).toEqual(["192.0.2.1", "2001:db8::1"])
    const id = buffer.current.id
    buffer.take() // seals: the rest is written
    expect(files()).toHaveLength(1)
    const round = readSegment(fs.readFileSync(path.join(dir, files()[0]!)), id)
    expect(round.count).toBe(3)
    expect([...round.times.subarray(0, 3)]).toEqual([t0, t0 + 1, t0 + 2])
    expect(clickLinksOf(round)).toEqual([
      ["link_x", "acc_x"],
      ["link_y", "acc_y"],
      ["link_x", "acc_x"]
    ])
    expect([...round.peers.subarray(0, 3)].map((i) => round.peerValues.values[i])).toEqual([
      "192.0.2.1",
      "2001:db8::1",
      "192.0.2.1"
    ])
    expect([...round.agents.subarray(0, 3)].map((i) => round.agentValues.values[i])).toEqual([CHROME, "curl/8", CHROME])
    expect([...round.referers.subarray(0, 3)]).toEqual([-1, 0, 0])
    expect(round.refererValues.values).toEqual(["https://a.example/x"])
    expect([...round.countries.subarray(0, 3)].map((i) => round.countryValues.values[i] ?? null)).toEqual([
      null,
      "FR",
      null
    ])
  })

  it("links interleaved over many writes, read back click for click", () => {
    const spool = new ClickSpool(dir, 60_000)
    const buffer = new ClickBuffer(100_000, 100_000)
    spool.attach(buffer)
    const expected: Array<[string, string]> = []
    for (let i = 0; i < 5_000; i++) {
      // Runs of one to three clicks on a link, a few links coming back later.
      const k = i % 7 === 0 ? 3 : Math.floor(i / 2)
      const link = `link_${k}`
      const account = `acc_${k % 3}`
      buffer.record(...clickOn({ linkId: link, accountId: account }), i, v4(192, 0, 2, i & 255), CHROME, "", "")
      expected.push([link, account])
      if (i % 37 === 0) spool.write(buffer.current)
    }
    const id = buffer.current.id
    buffer.take()
    const round = readSegment(fs.readFileSync(path.join(dir, files()[0]!)), id)
    expect(round.count).toBe(5_000)
    expect(clickLinksOf(round)).toEqual(expected)
    expect([...round.times.subarray(0, 5_000)]).toEqual(expected.map((_, i) => i))
  })

  it("a file of the earlier format (links as JSON pairs) still reads back", () => {
    const frame = (body: Buffer) => {
      const head = Buffer.alloc(8)
      head.writeUInt32LE(body.length, 0)
      head.writeUInt32LE(zlib.crc32(body) >>> 0, 4)
      return Buffer.concat([head, body])
    }
    const values = (column: number, list: ReadonlyArray<unknown>) =>
      frame(Buffer.concat([Uint8Array.of(1, column), Buffer.from(JSON.stringify(list))]))
    const clicks = Buffer.alloc(5 + 28 * 2)
    clicks[0] = 2
    clicks.writeUInt32LE(2, 1)
    clicks.writeDoubleLE(10, 5)
    clicks.writeDoubleLE(11, 13)
    // Columns after the times: link entry, peer, agent, referer, country; two clicks each.
    const columns = [
      [1, 0],
      [0, 0],
      [0, 0],
      [-1, -1],
      [-1, -1]
    ]
    for (const [c, col] of columns.entries()) {
      for (const [i, v] of col.entries()) clicks.writeInt32LE(v, 21 + 8 * c + 4 * i)
    }
    /** A file of that format whose two links are `x` and `y` (link id, account id). */
    const file = (x: [string, string], y: [string, string]) =>
      Buffer.concat([values(0, ["192.0.2.1"]), values(1, [CHROME]), values(4, [x, y]), frame(clicks)])
    const round = readSegment(file(["link_x", "acc_x"], ["link_y", "acc_y"]), "evt_0")
    expect(round.count).toBe(2)
    expect(clickLinksOf(round)).toEqual([
      ["link_y", "acc_y"],
      ["link_x", "acc_x"]
    ])
    expect([...round.times.subarray(0, 2)]).toEqual([10, 11])
    // An id the slug table could not hold (not visible ASCII) ends the reading there.
    expect(readSegment(file(["link_x", "acc_x"], ["link_ÿ", "acc_y"]), "evt_1").count).toBe(0)
  })

  it("a file cut short by a crash reads up to its last whole frame", () => {
    const spool = new ClickSpool(dir, 60_000)
    const buffer = new ClickBuffer(1_000, 1_000)
    spool.attach(buffer)
    buffer.record(...clickOn(linkX), 1, "192.0.2.1", CHROME, "", "")
    spool.write(buffer.current)
    const whole = fs.statSync(path.join(dir, files()[0]!)).size
    buffer.record(...clickOn(linkX), 2, "192.0.2.9", CHROME, "", "")
    buffer.record(...clickOn(linkX), 3, "192.0.2.9", CHROME, "", "")
    spool.write(buffer.current)
    const file = path.join(dir, files()[0]!)
    const data = fs.readFileSync(file)
    for (const cut of [whole, whole + 5, data.length - 1]) {
      expect(readSegment(data.subarray(0, cut), "evt_0").count).toBe(1)
    }
    const flipped = Buffer.from(data)
    flipped[flipped.length - 3] ^= 0xff
    expect(readSegment(flipped, "evt_0").count).toBe(1)
    expect(readSegment(data, "evt_0").count).toBe(3)
  })

  it("clicks are in the file within the spool's interval, and the file is deleted once the log has them", async () => {
    const log = recordingLog()
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const spool = new ClickSpool(dir, 5)
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 60_000, batchSize: 100_000, spool })
          for (let i = 0; i < 10; i++) buffer.record(...clickOn(linkX), Date.now(), "192.0.2.1", CHROME, "", "")
          yield* waitForEffect(
            Effect.sync(() => {
              expect(files()).toHaveLength(1)
              expect(readSegment(fs.readFileSync(path.join(dir, files()[0]!)), "evt_0").count).toBe(10)
              return true
            })
          )
          expect(log.published).toEqual([])
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    // Closing drained the buffer: published, and the file gone.
    expect(clicksIn(log.published)).toBe(10)
    expect(files()).toEqual([])
  })

  it("a few clicks wait out the interval; SPOOL_BATCH waiting clicks are written at the end of their turn", async () => {
    const spool = new ClickSpool(dir, 60_000)
    const buffer = new ClickBuffer(1_000_000, 100_000)
    spool.attach(buffer)
    const click = () => buffer.record(...clickOn(linkX), Date.now(), "192.0.2.1", CHROME, "", "")
    const inFile = () => readSegment(fs.readFileSync(path.join(dir, files()[0]!)), "evt_0").count
    /** The end of this event loop turn: after the spool's write, which was scheduled first. */
    const turn = () => new Promise((resolve) => setImmediate(resolve))
    try {
      // The first click, no write before it: written at the end of its turn.
      click()
      await turn()
      expect(inFile()).toBe(1)
      // Fewer than SPOOL_BATCH since: the write waits out the interval, over several turns.
      for (let i = 0; i < SPOOL_BATCH - 1; i++) click()
      await turn()
      await turn()
      expect(inFile()).toBe(1)
      // The SPOOL_BATCH-th: at the end of its turn, all of them.
      click()
      await turn()
      expect(inFile()).toBe(1 + SPOOL_BATCH)
      // And the interval holds again after that write.
      for (let i = 0; i < SPOOL_BATCH - 1; i++) click()
      await turn()
      expect(inFile()).toBe(1 + SPOOL_BATCH)
      click()
      await turn()
      expect(inFile()).toBe(1 + 2 * SPOOL_BATCH)
    } finally {
      spool.close()
      spool.seal(buffer.current)
    }
  })

  it("what a crashed process left is published by the next one with the same event ids, so it is counted once", async () => {
    const backup = fs.mkdtempSync(path.join(process.cwd(), ".tmp-spool-backup-"))
    try {
      // The first process: its publish is acknowledged, but it "dies" before deleting the files.
      const first = recordingLog(() => {
        for (const f of files()) fs.copyFileSync(path.join(dir, f), path.join(backup, f))
      })
      const t0 = Date.now()
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const buffer = yield* makeClickCapture(secrets, { intervalMs: 10, spool: new ClickSpool(dir, 5) })
            for (let i = 0; i < 5; i++) buffer.record(...clickOn(linkX), t0 + i, "192.0.2.1", CHROME, "", "")
            buffer.record(...clickOn(linkY), t0, "192.0.2.2", "curl/8", "https://a.example/", "DE")
            yield* waitForEffect(Effect.sync(() => clicksIn(first.published) === 6))
          })
        ).pipe(Effect.provide(first.layer), Effect.provide(quiet))
      )
      expect(files(backup).length).toBeGreaterThan(0)
      // The next process finds the files and publishes them first.
      const second = recordingLog()
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const spool = new ClickSpool(backup, 5)
            expect(spool.recovered.map((r) => r.count).reduce((a, b) => a + b, 0)).toBe(6)
            yield* makeClickCapture(secrets, { intervalMs: 10, spool })
            yield* waitForEffect(Effect.sync(() => clicksIn(second.published) === 6))
          })
        ).pipe(Effect.provide(second.layer), Effect.provide(quiet))
      )
      const idsAndData = (records: ReadonlyArray<OutgoingRecord>) =>
        records.map((r) => {
          const e = JSON.parse(r.value)
          return [r.key, e.id, e.account_id, e.data]
        })
      expect(idsAndData(second.published)).toEqual(idsAndData(first.published))
      expect(files(backup)).toEqual([])
    } finally {
      fs.rmSync(backup, { recursive: true, force: true })
    }
  })

  it("a second spool in the same process leaves the files of the first alone", () => {
    const first = new ClickSpool(dir, 60_000)
    const buffer = new ClickBuffer(1_000, 1_000)
    first.attach(buffer)
    buffer.record(...clickOn(linkX), 1, "192.0.2.1", CHROME, "", "")
    first.write(buffer.current)
    expect(files()).toHaveLength(1)
    expect(new ClickSpool(dir, 60_000).recovered).toEqual([])
    expect(files()).toHaveLength(1)
  })

  it("a file of a process of this host that still runs is left to it", () => {
    const host = os.hostname().replace(/[^A-Za-z0-9-]/g, "_")
    // pid 1 runs (init); a pid on another host says nothing about liveness here.
    fs.writeFileSync(path.join(dir, `${host}@1@0000000000-00000000@evt_00.clicks`), "")
    fs.writeFileSync(path.join(dir, `some-other-host@999999@0000000000-00000000@evt_01.clicks`), "")
    const spool = new ClickSpool(dir, 5)
    expect(spool.recovered).toEqual([])
    expect(files().sort()).toHaveLength(2)
  })

  it("a file of a sibling thread of this process is left to it; those of an earlier incarnation with this pid are taken", () => {
    const host = os.hostname().replace(/[^A-Za-z0-9-]/g, "_")
    const sibling = `${host}@${process.pid}.${spoolIncarnation}.${threadId + 1}@0000000000-00000000@evt_02.clicks`
    // The same pid, another start (a container's pid 1 after a restart), and the older naming.
    const earlier = `${host}@${process.pid}.0badc0de.${threadId + 1}@0000000000-00000001@evt_03.clicks`
    const older = `${host}@${process.pid}@0000000000-00000002@evt_04.clicks`
    for (const name of [sibling, earlier, older]) fs.writeFileSync(path.join(dir, name), "")
    new ClickSpool(dir, 5)
    // The taken files were empty: claimed, read back with no click, and deleted.
    expect(files()).toEqual([sibling])
  })
})
