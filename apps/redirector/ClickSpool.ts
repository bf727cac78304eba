import * as fs from "node:fs"
import { hostname } from "node:os"
import * as path from "node:path"
import { crc32 } from "node:zlib"
import { Config, Effect } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { type ClickBuffer, ClickRound, type Interned, type RoundSpool } from "./ClickRound.js"
import { storableId } from "./SlugTable.js"
import { held, SPOOL_OWNER as OWNER, ownerAlive } from "./SpoolOwner.js"

/**
 * The least time between two writes of the spool, unless SPOOL_BATCH clicks wait. A click is
 * written at the end of the event loop's turn that answered it, unless the last write was
 * less than this ago: then once it is this old, or at the end of the turn in which
 * SPOOL_BATCH clicks have come since. So a redirector makes at most 1000 writes a second
 * (a write costs ~5-20 µs here) at a low rate, where a millisecond holds a few clicks, and
 * one a turn at a high rate, where a turn holds a few dozen: a kill -9 loses the clicks of
 * the last millisecond or of the last turn, whichever is fewer (docs/redirect-tier.md, "A crash").
 */
export const SPOOL_INTERVAL_MS = 1
/** Clicks waiting for a write that bring it forward to the end of the turn. */
export const SPOOL_BATCH = 16

/** One round's file: `<host>@<owner>@<order>@<round id>.clicks`, frames appended to it. */
interface Segment {
  path: string
  fd: number
  /** Clicks of the round in the file. */
  written: number
  /** Values of the round's lists (peers, agents, referers, countries) in the file. */
  readonly values: [number, number, number, number]
  /** Bytes of the round's run entries in the file (`ClickRound.runBytes`). */
  runBytes: number
}

/**
 * Frame types: a list's new values (JSON), clicks (columns), link runs (binary: the round's
 * run entries as they are, so a click's link column is the index of its run in the round).
 */
const VALUES = 1
const CLICKS = 2
const LINKS = 3
/** The column of a VALUES frame that held [link id, account id] pairs (files of earlier versions). */
const ENTRY_COLUMN = 4
const safeHost = () => hostname().replace(/[^A-Za-z0-9-]/g, "_") || "host"

const columnsOf = (round: ClickRound): ReadonlyArray<Interned> => [
  round.peerValues,
  round.agentValues,
  round.refererValues,
  round.countryValues
]

const bytes = (a: Float64Array | Int32Array, from: number, count: number) =>
  new Uint8Array(a.buffer, a.byteOffset + from * a.BYTES_PER_ELEMENT, count * a.BYTES_PER_ELEMENT)

/**
 * Reads a segment back into a round: frame by frame, up to the first one that is cut short
 * or does not match its checksum (the tail a crash may leave), with every index checked.
 */
export const readSegment = (data: Buffer, id: string): ClickRound => {
  const round = new ClickRound(1024)
  round.id = id
  const columns = columnsOf(round)
  // Each distinct link id a number, so the flusher tells the runs' links apart as it does live ones.
  const numbers = new Map<string, number>()
  const run = (linkId: string, accountId: string) => {
    let n = numbers.get(linkId)
    if (n === undefined) {
      n = numbers.size
      numbers.set(linkId, n)
    }
    round.pushRun(n, linkId, accountId)
  }
  let off = 0
  while (off + 8 <= data.length) {
    const length = data.readUInt32LE(off)
    const end = off + 8 + length
    if (length < 2 || end > data.length) break
    const body = data.subarray(off + 8, end)
    if (crc32(body) >>> 0 !== data.readUInt32LE(off + 4)) break
    if (body[0] === VALUES) {
      const values: unknown = JSON.parse(body.subarray(2).toString())
      if (!Array.isArray(values)) break
      if (body[1] === ENTRY_COLUMN) {
        for (const [linkId, accountId] of values as Array<[string, string]>) {
          if (!storableId(linkId) || !storableId(accountId)) return round
          run(linkId, accountId)
        }
      } else {
        const column = columns[body[1]!]
        if (column === undefined) break
        for (const v of values) column.of(String(v))
      }
    } else if (body[0] === LINKS) {
      // Per run: u32 length and bytes of its link id, then the same of its account's id.
      let p = 1
      const text = () => {
        if (p + 4 > body.length) return undefined
        const n = body.readUInt32LE(p)
        if (p + 4 + n > body.length) return undefined
        const s = body.toString("latin1", p + 4, p + 4 + n)
        p += 4 + n
        return storableId(s) ? s : undefined
      }
      while (p < body.length) {
        const linkId = text()
        const accountId = text()
        if (linkId === undefined || accountId === undefined) return round
        run(linkId, accountId)
      }
    } else if (body[0] === CLICKS && body.length >= 5) {
      const n = body.readUInt32LE(1)
      if (body.length !== 5 + 28 * n) break
      const at = (col: number, i: number) => body.readInt32LE(5 + 8 * n + 4 * (col * n + i))
      const limits = [round.runs, ...columns.map((c) => c.values.length)]
      for (let i = 0; i < n; i++) {
        const idx = [0, 1, 2, 3, 4].map((col) => at(col, i))
        if (idx.some((x, col) => x >= limits[col]! || x < (col >= 3 ? -1 : 0))) return round
        const [link, peer, agent, referer, country] = idx as [number, number, number, number, number]
        round.pushIndexes(link, body.readDoubleLE(5 + 8 * i), peer, agent, referer, country)
      }
    } else {
      break
    }
    off = end
  }
  return round
}

/**
 * The crash spool of click capture: each round of clicks in its own append-only file in
 * `dir`, written at the end of the event loop's turn that recorded them, at most one write per
 * `intervalMs` (1 ms): one write of the new clicks, no fsync. A killed process (kill -9, OOM)
 * loses only the clicks answered since the last write: what is written is in the OS's page
 * cache. A
 * machine that loses power also loses what the OS had not yet written to disk (Linux writes
 * dirty pages back within ~30 s). Sealed when the flusher takes the
 * round and deleted once the event log has acknowledged the round's events. At start, the
 * files of processes (and incarnations) of this host that are gone are claimed (renamed, so two starting
 * processes cannot both take one) and read back for publishing first; their round ids come
 * back with them, so events published before a crash keep their ids and are counted once.
 */
export class ClickSpool implements RoundSpool {
  /** Rounds read back from the files of processes that are gone, oldest first. */
  readonly recovered: Array<ClickRound> = []
  /** Writes that failed (the round then stays in memory only, its file deleted). */
  failures = 0
  /** Clicks written, ever (for /metrics). */
  spooled = 0
  lastFailure: unknown = undefined
  private buffer: ClickBuffer | undefined
  private timer: NodeJS.Timeout | undefined
  private immediate: NodeJS.Immediate | undefined
  private order = 0
  private lastWrite = 0
  private readonly host = safeHost()
  /** The buffer every write is framed in (grows, never shrinks). */
  private out = Buffer.allocUnsafe(1 << 16)

  constructor(
    readonly dir: string,
    readonly intervalMs: number = SPOOL_INTERVAL_MS
  ) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    this.recover()
  }

  private recover() {
    const names = fs
      .readdirSync(this.dir)
      .filter((n) => n.endsWith(".clicks"))
      .sort(byOrder)
    for (const name of names) {
      const [host, owner, order, id] = name.slice(0, -".clicks".length).split("@")
      if (host !== this.host || id === undefined || !/^evt_[0-9a-f]+$/.test(id)) continue
      if (ownerAlive(owner!, path.join(this.dir, name))) continue
      const claimed = path.join(this.dir, `${this.host}@${OWNER}@${order}@${id}.clicks`)
      try {
        fs.renameSync(path.join(this.dir, name), claimed)
      } catch {
        continue // another process claimed it first
      }
      const round = readSegment(fs.readFileSync(claimed), id)
      if (round.count === 0) {
        fs.rmSync(claimed, { force: true })
        continue
      }
      held.add(claimed)
      round.spool = { path: claimed, fd: -1, written: round.count, values: [0, 0, 0, 0], runBytes: round.runEnd }
      this.recovered.push(round)
    }
  }

  /** From now on the buffer's rounds are written here. */
  attach(buffer: ClickBuffer) {
    this.buffer = buffer
    buffer.spool = this
    buffer.spoolIdle = true
  }

  wake() {
    const buffer = this.buffer!
    buffer.spoolIdle = false
    const wait = this.lastWrite + this.intervalMs - Date.now()
    if (wait <= 0) {
      this.immediate = setImmediate(this.tick).unref()
    } else {
      this.timer = setTimeout(this.tick, wait).unref()
      buffer.spoolDue = buffer.count - 1 + SPOOL_BATCH
    }
  }

  hurry() {
    this.buffer!.spoolDue = -1
    if (this.timer === undefined) return
    clearTimeout(this.timer)
    this.timer = undefined
    this.immediate = setImmediate(this.tick).unref()
  }

  /** Writes what came in since the last write; the next click wakes the writer again. */
  private readonly tick = () => {
    this.timer = undefined
    this.immediate = undefined
    const buffer = this.buffer!
    buffer.spoolIdle = true
    buffer.spoolDue = -1
    if (this.write(buffer.current)) this.lastWrite = Date.now()
  }

  /**
   * Appends the round's clicks not written yet; says whether there were any. Everything is
   * framed in one buffer kept for every write (one writeSync, nothing allocated per click): a
   * frame of each list's new values, a frame of the round's new run entries (each run of
   * clicks on one link names it once, copied as the round has it: no map, no string, so a
   * million links cost what one does) and the clicks' columns.
   */
  write(round: ClickRound): boolean {
    const n = round.count
    let segment = round.spool as Segment | null | undefined
    if (segment === null) return false // its file failed: the round is in memory only
    if (segment === undefined) {
      if (n === 0) return false
      const order = `${Date.now().toString(36).padStart(10, "0")}-${(this.order++).toString(36).padStart(8, "0")}`
      const file = path.join(this.dir, `${this.host}@${OWNER}@${order}@${round.id}.clicks`)
      try {
        segment = {
          path: file,
          fd: fs.openSync(file, "a", 0o600),
          written: 0,
          values: [0, 0, 0, 0],
          runBytes: 0
        }
      } catch (error) {
        return this.fail(round, undefined, error)
      }
      round.spool = segment
      held.add(file)
    }
    const from = segment.written
    const count = n - from
    if (count === 0) return false
    let end = 0
    const columns = columnsOf(round)
    for (let c = 0; c < 4; c++) {
      const values = columns[c]!.values
      if (values.length > segment.values[c]!) {
        const json = JSON.stringify(values.slice(segment.values[c]))
        const body = this.reserve(end, 2 + 3 * json.length)
        this.out[body] = VALUES
        this.out[body + 1] = c
        end = this.endFrame(end, body + 2 + this.out.write(json, body + 2))
        segment.values[c] = values.length
      }
    }
    const runsFrom = segment.runBytes
    const runsEnd = round.runEnd
    if (runsEnd > runsFrom) {
      const body = this.reserve(end, 1 + runsEnd - runsFrom)
      this.out[body] = LINKS
      round.runBytes.copy(this.out, body + 1, runsFrom, runsEnd)
      end = this.endFrame(end, body + 1 + runsEnd - runsFrom)
    }
    const body = this.reserve(end, 5 + 28 * count)
    this.out[body] = CLICKS
    this.out.writeUInt32LE(count, body + 1)
    let at = body + 5
    for (const column of [
      bytes(round.times, from, count),
      bytes(round.run, from, count),
      bytes(round.peers, from, count),
      bytes(round.agents, from, count),
      bytes(round.referers, from, count),
      bytes(round.countries, from, count)
    ]) {
      this.out.set(column, at)
      at += column.byteLength
    }
    end = this.endFrame(end, at)
    try {
      const done = fs.writeSync(segment.fd, this.out, 0, end)
      if (done !== end) throw new Error(`short write to ${segment.path}: ${done} of ${end} bytes`)
    } catch (error) {
      return this.fail(round, segment, error)
    }
    segment.written = n
    segment.runBytes = runsEnd
    this.spooled += count
    return true
  }

  /** Room for `bytes` more at `at` (the frame head included when `at` starts one): the body's offset. */
  private reserve(at: number, bytes: number): number {
    if (at + 8 + bytes > this.out.length) {
      const wider = Buffer.allocUnsafe(Math.max(this.out.length * 2, at + 8 + bytes))
      this.out.copy(wider, 0, 0, at)
      this.out = wider
    }
    return at + 8
  }

  /** A frame whose body runs from `start + 8` to `end`: its length and CRC-32 in front. */
  private endFrame(start: number, end: number): number {
    this.out.writeUInt32LE(end - start - 8, start)
    this.out.writeUInt32LE(crc32(this.out.subarray(start + 8, end)) >>> 0, start + 4)
    return end
  }

  /** A file that cannot be written is deleted (a part of a round must never be published under its ids). */
  private fail(round: ClickRound, segment: Segment | undefined, error: unknown): false {
    this.failures++
    this.lastFailure = error
    round.spool = null
    if (segment !== undefined) {
      if (segment.fd >= 0) fs.closeSync(segment.fd)
      fs.rmSync(segment.path, { force: true })
      held.delete(segment.path)
    }
    return false
  }

  seal(round: ClickRound) {
    this.write(round)
    const segment = round.spool as Segment | null | undefined
    if (segment != null && segment.fd >= 0) {
      fs.closeSync(segment.fd)
      segment.fd = -1
    }
  }

  detach(round: ClickRound): unknown {
    const segment = round.spool as Segment | null | undefined
    round.spool = undefined
    return segment?.path
  }

  remove(segment: unknown) {
    if (typeof segment !== "string") return
    fs.rmSync(segment, { force: true })
    held.delete(segment)
  }

  /** Stops the writer (the flusher's drain seals what is left). */
  close() {
    clearTimeout(this.timer)
    clearImmediate(this.immediate)
    this.timer = undefined
    this.immediate = undefined
    if (this.buffer !== undefined) {
      this.buffer.spoolIdle = false
      this.buffer.spoolDue = -1
    }
  }
}

const byOrder = (a: string, b: string) => {
  const key = (n: string) => n.split("@")[2] ?? ""
  return key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0
}

/**
 * CLICK_SPOOL: `on` (default) or `off`; REDIRECTOR_SPOOL_DIR: default `$DATA_DIR/spool/redirector`
 * (one per host: processes of one host share it, each claiming only the files of processes
 * that are gone); REDIRECTOR_SPOOL_INTERVAL_MS: the least time between two writes (default 1;
 * 0: at the end of every event loop turn with clicks).
 */
export const clickSpoolConfig = Config.all({
  on: Config.string("CLICK_SPOOL").pipe(
    Config.validate({
      message: "must be on or off",
      validation: (s) => ["on", "off"].includes(s.trim().toLowerCase())
    }),
    Config.map((s) => s.trim().toLowerCase() === "on"),
    Config.withDefault(true)
  ),
  dir: Config.option(Config.nonEmptyString("REDIRECTOR_SPOOL_DIR")),
  intervalMs: Config.integer("REDIRECTOR_SPOOL_INTERVAL_MS").pipe(
    Config.validate({ message: "must be 0 to 100 (milliseconds)", validation: (n) => n >= 0 && n <= 100 }),
    Config.withDefault(SPOOL_INTERVAL_MS)
  )
})

/** The configured spool (undefined when CLICK_SPOOL=off), its writer stopped with the scope. */
export const openClickSpool = Effect.gen(function* () {
  const config = yield* AppConfig
  const settings = yield* clickSpoolConfig
  if (!settings.on) return undefined
  const dir = settings.dir._tag === "Some" ? settings.dir.value : path.join(config.dataDir, "spool", "redirector")
  return yield* Effect.acquireRelease(
    Effect.try({
      try: () => new ClickSpool(dir, settings.intervalMs),
      catch: (cause) => new Error(`click spool: cannot use ${dir}: ${String(cause)}`)
    }).pipe(Effect.orDie),
    (spool) => Effect.sync(() => spool.close())
  )
})
