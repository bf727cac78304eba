import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { threadId } from "node:worker_threads"
import * as zlib from "node:zlib"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { ClickBuffer, type ClickRound, JOURNAL_BYTES, JOURNAL_HEADER } from "../../apps/redirector/ClickRound.js"
import { ClickSpool, clicksInSpool, readJournal, SPOOL_BATCH } from "../../apps/redirector/ClickSpool.js"
import { readSegment } from "../../apps/redirector/ClickSpoolV1.js"
import { makeClickCapture } from "../../apps/redirector/Clicks.js"
import { spoolIncarnation } from "../../apps/redirector/SpoolOwner.js"
import { EventLog, type OutgoingRecord } from "../../domain/EventLog.js"
import { type MappedFiles, mappedFiles } from "../../infra/fs/MappedFile.js"
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

const files = (d = dir) => fs.readdirSync(d).filter((n) => n.endsWith(".spool") || n.endsWith(".clicks"))
/** The clicks in a spool file (a journal), as a process started after a crash reads them. */
const clicksInFile = (name: string) => readJournal(fs.readFileSync(path.join(dir, name)))?.round.count ?? 0
/** The clicks in the spool's files. */
const clicksInFiles = (d = dir) => clicksInSpool(d)

// The mapped-file addon is built with the machine's C compiler (scripts/mapped-file.sh), as the
// redirector builds it: the suite below runs with it, and again writing the journals instead.
const addon = mappedFiles()
if (addon.addon === undefined) throw new Error(`the mapped-file addon is missing: ${addon.why}`)
/** The file of the buffer's current round. */
const fileOf = (buffer: ClickBuffer) => (buffer.current.spool as { path: string }).path
const modes: ReadonlyArray<[string, MappedFiles | null]> = [
  ["mapped", addon.addon],
  ["written a turn at a time", null]
]

/** A click buffer of 1,000 clicks whose rounds `spool` keeps. */
const attached = (spool: ClickSpool) => {
  const buffer = new ClickBuffer(1_000, 1_000)
  spool.attach(buffer)
  return buffer
}

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

describe.each(modes)("click spool, journals %s", (_mode, files_) => {
  const mapped = files_ !== null
  const open = (d = dir, intervalMs = 60_000) => new ClickSpool(d, intervalMs, files_)
  /** What a written spool writes at the end of a turn (a mapped one has nothing to write). */
  const sync = (spool: ClickSpool, buffer: ClickBuffer) => {
    spool.write(buffer.current)
  }

  it("a round recorded in several steps reads back click for click, values and links included", () => {
    const spool = open()
    expect(spool.mapped).toBe(mapped)
    const buffer = attached(spool)
    const t0 = 1_700_000_000_000
    buffer.record(...clickOn(linkX), t0, v4(192, 0, 2, 1), CHROME, "", "")
    buffer.record(...clickOn(linkY), t0 + 1, "2001:db8::1", "curl/8", "https://a.example/x", "FR")
    sync(spool, buffer)
    // The same IPv4 peer as a number (uWebSockets.js with the peer-address library): the same value.
    buffer.record(...clickOn(linkX), t0 + 2, 192 * 2 ** 24 + 2 * 256 + 1, CHROME, "https://a.example/x", "")
    expect(buffer.current.peerValues.values).toEqual(["192.0.2.1", "2001:db8::1"])
    const id = buffer.current.id
    const file = path.basename(fileOf(buffer))
    buffer.take() // seals: the rest is written
    const read = readJournal(fs.readFileSync(path.join(dir, file)))!
    const round = read.round
    expect(round.id).toBe(id)
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
    spool.close()
  })

  it("links interleaved over many writes, read back click for click", () => {
    const spool = open()
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
      if (i % 37 === 0) sync(spool, buffer)
    }
    const file = fileOf(buffer)
    buffer.take()
    const round = readJournal(fs.readFileSync(file))!.round
    expect(round.count).toBe(5_000)
    expect(clickLinksOf(round)).toEqual(expected)
    expect([...round.times.subarray(0, 5_000)]).toEqual(expected.map((_, i) => i))
    spool.close()
  })

  it("a journal cut short or torn by a crash reads up to its last whole record", () => {
    const spool = open()
    const buffer = attached(spool)
    buffer.record(...clickOn(linkX), 1, "192.0.2.1", CHROME, "", "")
    sync(spool, buffer)
    const whole = buffer.current.journalEnd
    // A new peer: a value record, then the click's.
    buffer.record(...clickOn(linkX), 2, "192.0.2.9", CHROME, "", "")
    buffer.record(...clickOn(linkX), 3, "192.0.2.9", CHROME, "", "")
    sync(spool, buffer)
    const end = buffer.current.journalEnd
    const data = Buffer.from(fs.readFileSync(fileOf(buffer)))
    for (const cut of [whole, whole + 5, end - 1]) {
      expect(readJournal(data.subarray(0, cut))!.round.count).toBe(cut < end - 32 ? 1 : 2)
    }
    // A record whose tag was not yet stored (the kill came in its middle) is the end.
    const torn = Buffer.from(data)
    torn.writeInt32LE(0, end - 32)
    expect(readJournal(torn)!.round.count).toBe(2)
    torn.writeInt32LE(0, whole)
    expect(readJournal(torn)!.round.count).toBe(1)
    expect(readJournal(data)!.round.count).toBe(3)
    // Nothing after the header is a round of its own; a header without its tag holds no round.
    expect(readJournal(data.subarray(0, JOURNAL_HEADER))!.round.count).toBe(0)
    const untagged = Buffer.from(data)
    untagged.writeInt32LE(0, 4)
    expect(readJournal(untagged)).toBeUndefined()
    spool.close()
  })

  it("a click record naming a value its journal never listed, or with no time, is the end", () => {
    const spool = open()
    const buffer = attached(spool)
    buffer.record(...clickOn(linkX), 1, "192.0.2.1", CHROME, "https://a.example/", "DE")
    buffer.record(...clickOn(linkX), 2, "192.0.2.9", CHROME, "", "")
    sync(spool, buffer)
    const last = buffer.current.journalEnd - 32
    const data = Buffer.from(fs.readFileSync(fileOf(buffer)))
    expect(readJournal(data)!.round.count).toBe(2)
    // Peer, agent, referer and country at 16, 20, 24, 28 of the record: two peers, one agent,
    // one referer and one country were listed (-1: none, only for referer and country).
    for (const [at, value] of [
      [16, 2],
      [16, -1],
      [20, 1],
      [20, -1],
      [24, 1],
      [24, -2],
      [28, 1],
      [28, -2]
    ] as const) {
      const bad = Buffer.from(data)
      bad.writeInt32LE(value, last + at)
      expect(readJournal(bad)!.round.count).toBe(1)
    }
    const timeless = Buffer.from(data)
    timeless.writeDoubleLE(Number.NaN, last + 8)
    expect(readJournal(timeless)!.round.count).toBe(1)
    spool.close()
  })

  it(`clicks are in the file ${mapped ? "when record returns" : "within the spool's interval"}, and the files are deleted once the log has them`, async () => {
    const log = recordingLog()
    const spool = open(dir, 5)
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 60_000, batchSize: 100_000, spool })
          for (let i = 0; i < 10; i++) {
            buffer.record(...clickOn(linkX), Date.now(), "192.0.2.1", CHROME, "", "")
            // Mapped, a click is in the page cache before the redirector writes its 302.
            if (mapped) expect(clicksInFile(path.basename(fileOf(buffer)))).toBe(i + 1)
          }
          yield* waitForEffect(
            Effect.sync(() => {
              expect(files()).toHaveLength(1)
              expect(clicksInFiles()).toBe(10)
              return true
            })
          )
          expect(log.published).toEqual([])
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    // Closing drained the buffer: published; the spool closed after it, its files gone.
    expect(clicksIn(log.published)).toBe(10)
    expect(clicksInFiles()).toBe(0)
    spool.close()
    expect(files()).toEqual([])
  })

  it("what a crashed process left is published by the next one with the same event ids, so it is counted once", async () => {
    const backup = fs.mkdtempSync(path.join(process.cwd(), ".tmp-spool-backup-"))
    try {
      // The first process: its publish is acknowledged, but it "dies" before clearing the files.
      const first = recordingLog(() => {
        for (const f of files()) fs.copyFileSync(path.join(dir, f), path.join(backup, f))
      })
      const t0 = Date.now()
      const died = open(dir, 5)
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const buffer = yield* makeClickCapture(secrets, { intervalMs: 10, spool: died })
            for (let i = 0; i < 5; i++) buffer.record(...clickOn(linkX), t0 + i, "192.0.2.1", CHROME, "", "")
            buffer.record(...clickOn(linkY), t0, "192.0.2.2", "curl/8", "https://a.example/", "DE")
            yield* waitForEffect(Effect.sync(() => clicksIn(first.published) === 6))
          })
        ).pipe(Effect.provide(first.layer), Effect.provide(quiet))
      )
      died.close()
      expect(clicksInFiles(backup)).toBe(6)
      // The next process finds the files and publishes them first.
      const second = recordingLog()
      const spool = open(backup, 5)
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
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
      // What it read back is deleted once published; its own files go when it closes.
      expect(clicksInFiles(backup)).toBe(0)
      spool.close()
      expect(files(backup)).toEqual([])
    } finally {
      fs.rmSync(backup, { recursive: true, force: true })
    }
  })

  it("a full journal: the round goes to the flusher as it is, the click starts the next round, none is lost", () => {
    const spool = open()
    const buffer = new ClickBuffer(1_000_000, 1_000_000)
    spool.attach(buffer)
    // Each click a new user agent of 4,000 characters: a record of its own.
    const n = Math.ceil(JOURNAL_BYTES / 4_000) + 10
    for (let i = 0; i < n; i++) buffer.record(...clickOn(linkX), i, "192.0.2.1", `ua${i}`.padEnd(4_000, "x"), "", "")
    expect(buffer.taken).toHaveLength(1)
    const full = buffer.taken[0]!
    expect(full.count + buffer.count).toBe(n)
    expect(buffer.waiting).toBe(full.count)
    sync(spool, buffer)
    const times = [
      ...readJournal(fs.readFileSync((full.spool as { path: string }).path))!.round.times.subarray(0, full.count),
      ...readJournal(fs.readFileSync(fileOf(buffer)))!.round.times.subarray(0, buffer.count)
    ]
    expect(times).toEqual(Array.from({ length: n }, (_, i) => i))
    spool.close()
  })

  it("a second spool in the same process leaves the files of the first alone", () => {
    const first = open()
    const buffer = attached(first)
    buffer.record(...clickOn(linkX), 1, "192.0.2.1", CHROME, "", "")
    sync(first, buffer)
    expect(files()).toHaveLength(1)
    expect(open().recovered).toEqual([])
    expect(clicksInFiles()).toBe(1)
    first.close()
  })
})

describe("click spool, mapped journals reused", () => {
  it("a file whose round was published starts the next round; the last round's records left in it are not read back", async () => {
    const log = recordingLog()
    const spool = new ClickSpool(dir, 5, addon.addon)
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 60_000, batchSize: 5, spool })
          const first = fileOf(buffer)
          for (let i = 0; i < 5; i++) buffer.record(...clickOn(linkX), Date.now(), "192.0.2.1", CHROME, "", "")
          // Published: the first file is free again, and holds no round.
          yield* waitForEffect(Effect.sync(() => clicksIn(log.published) === 5))
          yield* waitForEffect(Effect.sync(() => readJournal(fs.readFileSync(first)) === undefined))
          // Two rounds later the first file is used again: only the new round's two clicks read back.
          for (let round = 0; round < 3 && fileOf(buffer) !== first; round++) {
            for (let i = 0; i < 5; i++) buffer.record(...clickOn(linkY), Date.now(), "192.0.2.2", CHROME, "", "")
            yield* waitForEffect(Effect.sync(() => clicksIn(log.published) === 10 + 5 * round))
          }
          expect(fileOf(buffer)).toBe(first)
          buffer.record(...clickOn(linkX), Date.now(), "192.0.2.3", CHROME, "", "")
          buffer.record(...clickOn(linkX), Date.now(), "192.0.2.3", CHROME, "", "")
          const read = readJournal(fs.readFileSync(first))!.round
          expect(read.count).toBe(2)
          expect(read.peerValues.values).toEqual(["192.0.2.3"])
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    spool.close()
    expect(files()).toEqual([])
  })

  it("an outage: rounds piling up have their files cut to their journals, deleted once published; no descriptor is held", () => {
    const spool = new ClickSpool(dir, 60_000, addon.addon)
    const buffer = new ClickBuffer(1_000_000, 1_000_000)
    spool.attach(buffer)
    const sealed: Array<{ round: ClickRound; path: string; end: number }> = []
    for (let r = 0; r < 6; r++) {
      for (let i = 0; i < 3; i++) buffer.record(...clickOn(linkX), r * 10 + i, "192.0.2.1", CHROME, "", "")
      const path_ = fileOf(buffer)
      const end = buffer.current.journalEnd
      sealed.push({ round: buffer.take(), path: path_, end })
    }
    // The first three keep their size (MAPPED_IN_FLIGHT); later ones end with their journal.
    expect(sealed.map((s) => fs.statSync(s.path).size)).toEqual([
      JOURNAL_BYTES,
      JOURNAL_BYTES,
      JOURNAL_BYTES,
      ...sealed.slice(3).map((s) => s.end)
    ])
    expect(sealed.map((s) => readJournal(fs.readFileSync(s.path))!.round.count)).toEqual([3, 3, 3, 3, 3, 3])
    // The mappings hold the files: no descriptor of the spool's is open.
    const open = fs
      .readdirSync("/proc/self/fd")
      .map((fd) => {
        try {
          return fs.readlinkSync(`/proc/self/fd/${fd}`)
        } catch {
          return ""
        }
      })
      .filter((target) => target.startsWith(dir))
    expect(open).toEqual([])
    // Published: two full files are kept for the next rounds, the rest deleted.
    for (const { round } of sealed) spool.remove(spool.detach(round))
    expect(files()).toHaveLength(3) // the current round's and two kept
    expect(sealed.filter((s) => fs.existsSync(s.path)).map((s) => s.path)).toEqual(
      sealed.slice(0, 2).map((s) => s.path)
    )
    spool.close()
    expect(files()).toEqual([])
  })

  it("a spool whose files cannot be mapped keeps its rounds in memory and says so", () => {
    const failing: MappedFiles = {
      map: () => {
        throw new Error("No space left on device")
      }
    }
    const spool = new ClickSpool(dir, 60_000, failing)
    const buffer = attached(spool)
    buffer.record(...clickOn(linkX), 1, "192.0.2.1", CHROME, "", "")
    expect(buffer.count).toBe(1)
    expect(spool.failures).toBe(1)
    expect(String(spool.lastFailure)).toContain("No space left")
    expect(files()).toEqual([])
    spool.close()
  })
})

describe("click spool, written a turn at a time", () => {
  it("a few clicks wait out the interval; SPOOL_BATCH waiting clicks are written at the end of their turn", async () => {
    const spool = new ClickSpool(dir, 60_000, null)
    const buffer = new ClickBuffer(1_000_000, 100_000)
    spool.attach(buffer)
    const click = () => buffer.record(...clickOn(linkX), Date.now(), "192.0.2.1", CHROME, "", "")
    const inFile = () => clicksInFiles()
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
})

describe("click spool files of earlier versions and of other owners", () => {
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
