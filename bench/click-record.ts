/**
 * A micro-benchmark of the request path's share of click capture, per click: the push into
 * the click buffer (ClickBuffer.record, with an IPv4 address as uWebSockets.js hands it: into
 * the round's columns and its journal), with the journal in memory (no spool), in the spool's
 * mapped file, and in memory written to the spool's file at the end of a loop turn (where
 * files cannot be mapped: one write per turn of BENCH_TURN clicks, default 64: a busy
 * redirector's turn). As on the request path, each
 * click's record is read first (its link number: what the lookup leaves in the cache), one
 * click after the other; a pass that only reads the records is the baseline the push's share
 * is measured over. The address read itself (a call into uWS that allocates an ArrayBuffer)
 * and the flusher's conversion are measured by a CPU profile of the running redirector
 * instead (bench/cpu-profile-summary.ts).
 *
 *   node --import tsx bench/click-record.ts   (BENCH_LINKS=1000000: a random link of a million per click)
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ClickBuffer } from "../apps/redirector/ClickRound.js"
import { ClickSpool } from "../apps/redirector/ClickSpool.js"
import { mappedFiles } from "../infra/fs/MappedFile.js"
import { scaleTable } from "./scale-links.js"

const CLICKS = 2_000_000
const TURN = Number(process.env.BENCH_TURN ?? 64)
const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
const peers = Array.from({ length: 256 }, (_, i) => Uint8Array.of(192, 0, 2, i).buffer)

// BENCH_LINKS=N: each click on a random link of N, as the slug table holds them.
const LINKS = Number(process.env.BENCH_LINKS ?? 1)
const table = scaleTable(LINKS)
const rows = Int32Array.from({ length: 1 << 16 }, () => table.rowOf(`/s${1 + Math.floor(Math.random() * LINKS)}`))

/** `record` false: the records read and nothing pushed (the baseline). */
const run = (spool: ClickSpool | undefined, record = true) => {
  const buffer = new ClickBuffer(Number.MAX_SAFE_INTEGER, 10_000)
  if (spool !== undefined) {
    spool.attach(buffer)
    buffer.spoolIdle = false // written by hand below, once per turn
  }
  const faults = process.resourceUsage().minorPageFault
  const started = process.hrtime.bigint()
  let writeNs = 0n
  // Each click's row depends on the record read before it (always 0 added, which the compiler
  // cannot know): one request after the other, so the reads' cache misses do not overlap.
  let after = 0
  for (let i = 0; i < CLICKS; i++) {
    const row = rows[(i + after) & 0xffff]!
    after = table.linkNumber(row) >>> 31
    // A fresh string per request, as a header read gives one.
    if (record) buffer.record(table, row, 1_700_000_000_000 + i, peers[i & 255]!, `${UA}`, "", "")
    if (spool !== undefined && i % TURN === TURN - 1) {
      const t = process.hrtime.bigint()
      spool.write(buffer.current)
      writeNs += process.hrtime.bigint() - t
    }
    if (buffer.count >= 10_000) {
      const round = buffer.take()
      buffer.waiting = 0
      if (spool !== undefined) spool.remove(spool.detach(round))
      buffer.release(round)
    }
  }
  const totalNs = Number(process.hrtime.bigint() - started)
  return {
    perClick: totalNs / CLICKS,
    writePerClick: Number(writeNs) / CLICKS,
    faultsPerMillion: (process.resourceUsage().minorPageFault - faults) / (CLICKS / 1e6)
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "click-record-"))
try {
  run(undefined) // warm-up
  const lookup = run(undefined, false).perClick
  const bare = run(undefined).perClick - lookup
  const addon = mappedFiles().addon
  if (addon === undefined) throw new Error(`no mapped files: ${mappedFiles().why}`)
  const mappedRun = run(new ClickSpool(dir, 0, addon))
  const mapped = mappedRun.perClick - lookup
  const written = run(new ClickSpool(dir, 0, null))
  process.stdout.write(
    `${LINKS} link(s), record: ${bare.toFixed(0)} ns a click without the spool; ${mapped.toFixed(0)} ns into the spool's mapped file; ` +
      `${(written.perClick - lookup).toFixed(0)} ns written a turn at a time (of which the writes, one per ${TURN} clicks: ` +
      `${written.writePerClick.toFixed(0)} ns a click); over reading the click's record, ${lookup.toFixed(0)} ns; ` +
      `minor page faults a million clicks: ${mappedRun.faultsPerMillion.toFixed(0)} mapped, ${written.faultsPerMillion.toFixed(0)} written\n`
  )
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
