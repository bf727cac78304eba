import * as fs from "node:fs"
import { hostname } from "node:os"
import * as path from "node:path"
import { Config, Effect } from "effect"
import { AppConfig } from "../../infra/AppConfig.js"
import { type MappedFiles, mappedFiles } from "../../infra/fs/MappedFile.js"
import {
  CLICK,
  type ClickBuffer,
  ClickRound,
  JOURNAL_BYTES,
  JOURNAL_HEADER,
  JOURNAL_MAGIC,
  type RoundSpool,
  RUN,
  tagOf,
  VALUES
} from "./ClickRound.js"
import { readSegment } from "./ClickSpoolV1.js"
import { storableId } from "./SlugTable.js"
import { held, SPOOL_OWNER as OWNER, ownerAlive } from "./SpoolOwner.js"

/**
 * Where the spool's files cannot be mapped (no addon): the least time between two writes of
 * the spool, unless SPOOL_BATCH clicks wait. A click is written at the end of the event
 * loop's turn that answered it, unless the last write was less than this ago: then once it is
 * this old, or at the end of the turn in which SPOOL_BATCH clicks have come since. So a
 * redirector makes at most 1000 writes a second (a write costs ~5-20 µs here) at a low rate,
 * where a millisecond holds a few clicks, and one a turn at a high rate, where a turn holds a
 * few dozen: a kill -9 loses the clicks of the last millisecond or of the last turn, whichever
 * is fewer (docs/redirect-tier.md, "A crash").
 */
export const SPOOL_INTERVAL_MS = 1
/** Clicks waiting for a write that bring it forward to the end of the turn. */
export const SPOOL_BATCH = 16
/** How the start's warning begins when the spool's files cannot be mapped (the crash test and bench look for it). */
export const SPOOL_UNMAPPED = "click spool: files written a turn at a time"

/**
 * A file of the spool mapped over a round's journal (ClickRound.ts): `<host>@<owner>@<name>.spool`.
 * It outlives its round: once the event log has acknowledged the round's events its tag is
 * cleared and the next round's journal starts in it, the pages already in memory. No file
 * descriptor is kept open (the mapping holds the file).
 */
class MappedSlot {
  /** Cut to its round's journal (MAPPED_IN_FLIGHT): deleted once published, not reused. */
  cut = false
  constructor(
    readonly path: string,
    readonly memory: ArrayBuffer
  ) {}
}

/**
 * Sealed rounds whose mapped files keep their JOURNAL_BYTES while the event log has not yet
 * acknowledged them (normally one or two, for ~100 ms). Past that, as in an outage of the
 * log, when rounds pile up one a flush, a sealed file is cut to the journal it holds, so the
 * disk holds what the clicks take, not 2 MiB a round.
 */
const MAPPED_IN_FLIGHT = 3

/** A file the spool writes a round's journal to (no mapped files here): appended to a turn at a time. */
class WrittenFile {
  /** Bytes of the journal in the file, and its clicks. */
  written = 0
  clicks = 0
  constructor(
    readonly path: string,
    public fd: number
  ) {}
}

/** A file read back at start (a crashed process's), deleted once its round's events are acknowledged. */
class ClaimedFile {
  constructor(readonly path: string) {}
}

const safeHost = () => hostname().replace(/[^A-Za-z0-9-]/g, "_") || "host"
/** Names of this thread's files (several spools may share a thread: tests, apps/all). */
let fileNumber = 0

/** The order rounds are published in after a crash: their start, then their sequence number. */
const orderKey = (time: number, sequence: number) =>
  `${Math.max(0, Math.floor(time)).toString(36).padStart(10, "0")}-${sequence.toString(36).padStart(8, "0")}`

/**
 * Reads a round's journal back (a spool file): its header, then record by record up to the
 * first whose tag is not the round's (a record cut short by a crash, or an earlier round's
 * left in a reused file), with every length and index checked. Undefined when the header holds
 * no round.
 */
export const readJournal = (data: Buffer): { readonly round: ClickRound; readonly order: string } | undefined => {
  if (data.length < JOURNAL_HEADER || data.readUInt32LE(0) !== JOURNAL_MAGIC) return undefined
  const tag = data.readInt32LE(4)
  const id = data.toString("latin1", 24, 48)
  if (tag === 0 || !/^evt_[0-9a-f]{20}$/.test(id) || tagOf(id) !== tag) return undefined
  const round = new ClickRound(1024)
  round.id = id
  round.journal = data
  round.journalSize = data.length
  const columns = round.lists()
  // Each distinct link id a number, so the flusher tells the runs' links apart as it does live ones.
  const numbers = new Map<string, number>()
  let off = JOURNAL_HEADER
  while (off + 8 <= data.length && data.readInt32LE(off) === tag) {
    const word = data.readUInt32LE(off + 4)
    const kind = word & 0xff
    const body = off + 8
    const end = body + (word >>> 8)
    if (end > data.length) break
    if (kind === CLICK) {
      if (end - body !== 24 || round.runs === 0) break
      const time = data.readDoubleLE(body)
      // Its peer, agent, referer and country: indexes into the lists (-1: no referer, no country).
      const [peer, agent, referer, country] = columns.map((column, k) => {
        const x = data.readInt32LE(body + 8 + 4 * k)
        return x >= (k >= 2 ? -1 : 0) && x < column.values.length ? x : Number.NaN
      }) as [number, number, number, number]
      if (!Number.isFinite(time + peer + agent + referer + country)) break
      round.pushIndexes(round.runs - 1, time, peer, agent, referer, country)
    } else if (kind === RUN) {
      // The u32 length and bytes of its link id, then the same of its account's id.
      let p = body
      const text = () => {
        if (p + 4 > end) return undefined
        const n = data.readUInt32LE(p)
        if (p + 4 + n > end) return undefined
        const s = data.toString("latin1", p + 4, p + 4 + n)
        p += 4 + n
        return storableId(s) ? s : undefined
      }
      const linkId = text()
      const accountId = text()
      if (linkId === undefined || accountId === undefined || p !== end) break
      let n = numbers.get(linkId)
      if (n === undefined) {
        n = numbers.size
        numbers.set(linkId, n)
      }
      round.pushRunAt(n, accountId, body)
    } else if (kind >= VALUES && kind < VALUES + 4) {
      const column = columns[kind - VALUES]!
      const known = column.values.length
      // Each value once a round: a repeated one would shift the indexes after it.
      if (column.of(data.toString("utf8", body, end)) !== known) break
    } else {
      break
    }
    off = (end + 7) & ~7
  }
  round.journalEnd = off
  return { round, order: orderKey(data.readDoubleLE(8), data.readUInt32LE(16)) }
}

/** The clicks that the journals in a spool directory hold, as a start after a crash would read them back. */
export const clicksInSpool = (dir: string): number =>
  fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((name) => name.endsWith(".spool"))
        .reduce((n, name) => n + (readJournal(fs.readFileSync(path.join(dir, name)))?.round.count ?? 0), 0)
    : 0

/**
 * The crash spool of click capture: each round's journal (ClickRound.ts) in a file of its own
 * in `dir`, `<host>@<owner>@<name>.spool`.
 *
 * Where infra/fs/mapped-file.c can be built, the journal is the file, mapped shared: a click's
 * record is in the OS's page cache before its 302 is written, so a killed process (kill -9,
 * OOM) loses no click that was answered, with no system call on the request path. A file
 * outlives its round: once the event log has acknowledged the round's events its header is
 * cleared and a later round's journal starts in it (two such files are kept).
 *
 * Without the addon, the journal is in memory and appended to its file at the end of the event
 * loop's turn that recorded the clicks, at most one write per `intervalMs` (1 ms) unless
 * SPOOL_BATCH clicks wait: a kill -9 then loses the clicks answered since the last write.
 *
 * No fsync either way: a machine that loses power also loses what the OS had not yet written
 * to disk (Linux writes dirty pages back within ~30 s). At start, the files of processes (and
 * incarnations) of this host that are gone are claimed (renamed, so two starting processes
 * cannot both take one) and read back for publishing first; their round ids come back with
 * them, so events published before a crash keep their ids and are counted once.
 */
export class ClickSpool implements RoundSpool {
  /** Rounds read back from the files of processes that are gone, oldest first. */
  readonly recovered: Array<ClickRound> = []
  /** Files that failed (a round then stays in memory only, its file deleted). */
  failures = 0
  lastFailure: unknown = undefined
  /** Whether journals are mapped files (else written a turn at a time). */
  readonly mapped: boolean
  private buffer: ClickBuffer | undefined
  private timer: NodeJS.Timeout | undefined
  private immediate: NodeJS.Immediate | undefined
  private sequence = 0
  private lastWrite = 0
  /** Clicks of the rounds sealed (mapped), or written (not mapped). */
  private stored = 0
  private readonly free: Array<MappedSlot> = []
  /** Mapped files that hold a round not yet published (the current one's included). */
  private inUse = 0
  private readonly host = safeHost()

  /** `files`: the mapped-file addon (infra/fs/MappedFile.ts); null writes the journals instead. */
  constructor(
    readonly dir: string,
    readonly intervalMs: number = SPOOL_INTERVAL_MS,
    private readonly files: MappedFiles | null = mappedFiles().addon ?? null
  ) {
    this.mapped = files !== null
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    this.recover()
  }

  /** Clicks in the spool's files, ever (for /metrics). */
  get spooled(): number {
    const buffer = this.buffer
    return this.stored + (buffer !== undefined && buffer.current.spool instanceof MappedSlot ? buffer.count : 0)
  }

  private fileName(kind: string) {
    return path.join(this.dir, `${this.host}@${OWNER}@${kind}${(fileNumber++).toString(36)}.spool`)
  }

  private recover() {
    const found: Array<{ round: ClickRound; order: string }> = []
    for (const name of fs.readdirSync(this.dir)) {
      const legacy = name.endsWith(".clicks")
      if (!legacy && !name.endsWith(".spool")) continue
      const parts = name.slice(0, name.lastIndexOf(".")).split("@")
      const [host, owner] = parts
      if (host !== this.host || parts.length !== (legacy ? 4 : 3)) continue
      const id = parts[3]
      if (legacy && !/^evt_[0-9a-f]+$/.test(id!)) continue
      if (ownerAlive(owner!, path.join(this.dir, name))) continue
      const claimed = this.fileName("r")
      try {
        fs.renameSync(path.join(this.dir, name), claimed)
      } catch {
        continue // another process claimed it first
      }
      const data = fs.readFileSync(claimed)
      const read = legacy ? { round: readSegment(data, id!), order: parts[2]! } : readJournal(data)
      if (read === undefined || read.round.count === 0) {
        fs.rmSync(claimed, { force: true })
        continue
      }
      held.add(claimed)
      read.round.spool = new ClaimedFile(claimed)
      found.push(read)
    }
    found.sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0))
    for (const { round } of found) this.recovered.push(round)
  }

  /** From now on the buffer's rounds are kept here (its current round, empty, starts a journal here). */
  attach(buffer: ClickBuffer) {
    this.buffer = buffer
    buffer.spool = this
    buffer.spoolIdle = !this.mapped
    if (buffer.count === 0) this.assign(buffer.current)
  }

  assign(round: ClickRound) {
    const sequence = this.sequence++
    round.spool = undefined
    if (!this.mapped) {
      round.beginInMemory(Date.now(), sequence) // its file is opened at its first write
      return
    }
    let slot = this.free.pop()
    if (slot === undefined) {
      const file = this.fileName("m")
      let fd = -1
      try {
        fd = fs.openSync(file, "w+", 0o600)
        slot = new MappedSlot(file, this.files!.map(fd, JOURNAL_BYTES))
        held.add(file)
      } catch (error) {
        fs.rmSync(file, { force: true })
        this.failures++
        this.lastFailure = error
        round.beginInMemory(Date.now(), sequence)
        round.spool = null // in memory only
        return
      } finally {
        if (fd >= 0) fs.closeSync(fd)
      }
    }
    round.begin(slot.memory, Date.now(), sequence)
    round.spool = slot
    this.inUse++
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
   * Appends the round's journal not written yet (one write at its place in the file, nothing
   * allocated); says whether there was any. A mapped journal has nothing to write.
   */
  write(round: ClickRound): boolean {
    const spool = round.spool
    if (round.count === 0 || !(spool === undefined || spool instanceof WrittenFile)) return false
    let file = spool
    if (file === undefined) {
      const name = this.fileName("w")
      try {
        file = new WrittenFile(name, fs.openSync(name, "w", 0o600))
      } catch (error) {
        return this.fail(round, undefined, error)
      }
      round.spool = file
      held.add(name)
    }
    const from = file.written
    const end = round.journalEnd
    if (end === from) return false
    try {
      const done = fs.writeSync(file.fd, round.journal, from, end - from, from)
      if (done !== end - from) throw new Error(`short write to ${file.path}: ${done} of ${end - from} bytes`)
    } catch (error) {
      return this.fail(round, file, error)
    }
    file.written = end
    this.stored += round.count - file.clicks
    file.clicks = round.count
    return true
  }

  /** A file that cannot be written is deleted (a part of a round must never be published under its ids). */
  private fail(round: ClickRound, file: WrittenFile | undefined, error: unknown): false {
    this.failures++
    this.lastFailure = error
    round.spool = null
    if (file !== undefined) {
      if (file.fd >= 0) fs.closeSync(file.fd)
      fs.rmSync(file.path, { force: true })
      held.delete(file.path)
    }
    return false
  }

  seal(round: ClickRound) {
    const slot = round.spool
    if (slot instanceof MappedSlot) {
      this.stored += round.count
      // Nothing past the journal's end is read or stored again: the file can end there.
      if (this.inUse > MAPPED_IN_FLIGHT) {
        try {
          fs.truncateSync(slot.path, round.journalEnd)
          slot.cut = true
        } catch (error) {
          this.failures++
          this.lastFailure = error
        }
      }
      return
    }
    this.write(round)
    const written = round.spool
    if (written instanceof WrittenFile && written.fd >= 0) {
      fs.closeSync(written.fd)
      written.fd = -1
    }
  }

  detach(round: ClickRound): unknown {
    const file = round.spool
    round.spool = undefined
    return file
  }

  remove(segment: unknown) {
    if (segment instanceof MappedSlot) {
      // Its round is published: its records are no longer a round's.
      new Int32Array(segment.memory, 4, 1)[0] = 0
      this.inUse--
      if (this.free.length < 2 && this.buffer !== undefined && !segment.cut) this.free.push(segment)
      else this.drop(segment)
    } else if (segment instanceof WrittenFile || segment instanceof ClaimedFile) {
      fs.rmSync(segment.path, { force: true })
      held.delete(segment.path)
    }
  }

  private drop(slot: MappedSlot) {
    fs.rmSync(slot.path, { force: true })
    held.delete(slot.path)
  }

  /**
   * Stops the writer (the flusher's drain has published what it could): the files that hold no
   * click are deleted, those that do are left for the next start.
   */
  close() {
    clearTimeout(this.timer)
    clearImmediate(this.immediate)
    this.timer = undefined
    this.immediate = undefined
    const buffer = this.buffer
    if (buffer !== undefined) {
      buffer.spoolIdle = false
      buffer.spoolDue = -1
      if (buffer.count === 0) this.remove(this.detach(buffer.current))
      this.buffer = undefined
    }
    for (const slot of this.free.splice(0)) this.drop(slot)
  }
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
  const spool = yield* Effect.acquireRelease(
    Effect.try({
      try: () => new ClickSpool(dir, settings.intervalMs),
      catch: (cause) => new Error(`click spool: cannot use ${dir}: ${String(cause)}`)
    }).pipe(Effect.orDie),
    (spool) => Effect.sync(() => spool.close())
  )
  if (!spool.mapped) {
    yield* Effect.logWarning(
      `${SPOOL_UNMAPPED}, so a kill -9 loses the clicks of its last turn; ` +
        `mapped files need infra/fs/mapped-file.c built: ${mappedFiles().why}`
    )
  }
  return spool
})
