/**
 * The baseline of the redirect benchmark: a bare uWebSockets.js server that answers every
 * request with the same 302 the redirector sends (Location and Cache-Control), with no slug
 * table, no click capture and no Effect. What uWS alone costs on this machine.
 *
 *   node --import tsx bench/bare-uws.ts [port]     (or BARE_PORT; default 18491)
 *
 * It loads the same native binary as the redirector and refuses to start without it, so the
 * comparison never silently measures a fallback.
 *
 * BARE_MODE adds one of the redirector's costs at a time (bench/redirect-costs.sh):
 *   `address`  reads the peer's address per request (uWS allocates an ArrayBuffer for it);
 *   `table`    looks the path up in a Map of BARE_LINKS (default 1,000,000) paths /s1 … /sN
 *              and answers with that row's own Location string, as the slug table does;
 *   `table+address` both. Default: neither.
 */
import { loadUws } from "../infra/http/HttpServer.js"

const port = Number(process.argv[2] ?? process.env.BARE_PORT ?? 18491)
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`bench/bare-uws.ts: not a port: ${process.argv[2] ?? process.env.BARE_PORT}\n`)
  process.exit(1)
}

const loaded = loadUws()
if (!("module" in loaded)) {
  process.stderr.write(`bench/bare-uws.ts: uWebSockets.js does not load: ${loaded.error}\n`)
  process.exit(1)
}
const uws = loaded.module

const LOCATION = "https://example.com/bench?utm_source=bench"
const mode = process.env.BARE_MODE ?? ""
if (!["", "address", "table", "table+address", "arena", "arena+address"].includes(mode)) {
  process.stderr.write(`bench/bare-uws.ts: BARE_MODE must be address, table or table+address, not ${mode}\n`)
  process.exit(1)
}
const readAddress = mode.includes("address")
const links = mode.includes("table") ? Number(process.env.BARE_LINKS ?? 1_000_000) : 0
const arenaLinks = mode.includes("arena") ? Number(process.env.BARE_LINKS ?? 1_000_000) : 0
const hashPath = (s: string) => {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193)
  return h | 1
}
let cap = 1
while (cap < arenaLinks * 2) cap *= 2
const slots = new Int32Array(arenaLinks > 0 ? cap * 2 : 2)
const arena = new Uint8Array(arenaLinks > 0 ? arenaLinks * 64 : 1)
let used = 1
const slotMask = cap * 2 - 1
for (let k = 1; k <= arenaLinks; k++) {
  const path = `/s${k}`
  const loc = `https://example.com/scale/${k}`
  const h = hashPath(path)
  let i = (h << 1) & slotMask
  while (slots[i + 1] !== 0) i = (i + 2) & slotMask
  slots[i] = h
  slots[i + 1] = used
  arena[used] = path.length
  for (let c = 0; c < path.length; c++) arena[used + 1 + c] = path.charCodeAt(c)
  const at = used + 1 + path.length
  arena[at] = loc.length
  for (let c = 0; c < loc.length; c++) arena[at + 1 + c] = loc.charCodeAt(c)
  used = at + 1 + loc.length
}
const arenaLookup = (path: string): Uint8Array | undefined => {
  const h = hashPath(path)
  let i = (h << 1) & slotMask
  for (;;) {
    const off = slots[i + 1]!
    if (off === 0) return undefined
    if (slots[i] === h && arena[off] === path.length) {
      let c = 0
      while (c < path.length && arena[off + 1 + c] === path.charCodeAt(c)) c++
      if (c === path.length) {
        const at = off + 1 + c
        return new Uint8Array(arena.buffer, at + 1, arena[at]!)
      }
    }
    i = (i + 2) & slotMask
  }
}
const rows = new Map<string, number>()
const locations: Array<string> = []
for (let i = 1; i <= links; i++) {
  rows.set(`/s${i}`, i - 1)
  locations.push(`https://example.com/scale/${i}`)
}
let addressBytes = 0

const app = uws.App().any("/*", (res, req) => {
  let location = LOCATION
  if (links > 0) {
    const row = rows.get(req.getUrl())
    if (row !== undefined) location = locations[row]!
  }
  if (arenaLinks > 0) {
    const view = arenaLookup(req.getUrl())
    if (readAddress) addressBytes += res.getRemoteAddress().byteLength
    if (view !== undefined) {
      res.writeStatus("302 Found").writeHeader("Location", view).writeHeader("Cache-Control", "private, no-store").end()
      return
    }
  }
  if (readAddress) addressBytes += res.getRemoteAddress().byteLength
  res.writeStatus("302 Found").writeHeader("Location", location).writeHeader("Cache-Control", "private, no-store").end()
})

app.listen("0.0.0.0", port, (socket) => {
  if (socket === false) {
    process.stderr.write(`bench/bare-uws.ts: could not listen on 0.0.0.0:${port}\n`)
    process.exit(1)
  }
  process.stdout.write(`bare uWS 302 server listening on 0.0.0.0:${uws.us_socket_local_port(socket as never)}\n`)
  const stop = () => {
    if (addressBytes < 0) process.stdout.write("unreachable\n") // keeps the read from being optimized away
    uws.us_listen_socket_close(socket)
    process.exit(0)
  }
  process.on("SIGINT", stop)
  process.on("SIGTERM", stop)
})
