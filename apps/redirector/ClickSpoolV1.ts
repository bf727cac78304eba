import { crc32 } from "node:zlib"
import { ClickRound } from "./ClickRound.js"
import { storableId } from "./SlugTable.js"

// The click spool's files of earlier versions (`<host>@<owner>@<order>@<round id>.clicks`),
// read back at start so that an upgrade after a crash loses none of their clicks; the spool
// writes journals now (ClickSpool.ts). Delete once no such file can be left.

/**
 * Frame types of the spool files of earlier versions (`.clicks`): a list's new values (JSON),
 * clicks (columns), link runs (binary: the round's run entries as they are, so a click's link
 * column is the index of its run in the round).
 */
const VALUES_FRAME = 1
const CLICKS_FRAME = 2
const LINKS_FRAME = 3
/** The column of a VALUES frame that held [link id, account id] pairs (files of earlier versions). */
const ENTRY_COLUMN = 4

/**
 * Reads a spool file of an earlier version (`.clicks`) back into a round: frame by frame, up
 * to the first one that is cut short or does not match its checksum (the tail a crash may
 * leave), with every index checked.
 */
export const readSegment = (data: Buffer, id: string): ClickRound => {
  const round = new ClickRound(1024)
  round.id = id
  const columns = round.lists()
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
    if (body[0] === VALUES_FRAME) {
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
    } else if (body[0] === LINKS_FRAME) {
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
    } else if (body[0] === CLICKS_FRAME && body.length >= 5) {
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
