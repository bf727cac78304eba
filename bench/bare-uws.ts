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
 *   `table`    looks the path up in the redirector's slug table (apps/redirector/SlugTable.ts)
 *              of BARE_LINKS (default 1,000,000) links /s1 … /sN and answers with that
 *              link's own Location, as the redirector does;
 *   `table+address` both;
 *   `syscall`  makes one other system call per request instead (a 1-byte write to /dev/null):
 *              what any system call costs on this machine, next to `address`, whose cost is
 *              mostly its getpeername(2);
 *   `table+syscall` the table and that system call;
 *   `table+buffer`  the table and a new 4-byte ArrayBuffer per request: what the address read
 *              allocates, without its system call;
 *   `view`     reads the peer's address from the current-peer view (infra/http/PeerAddress.ts:
 *              needs infra/http/peer-address.c preloaded and its addon built), as the redirector
 *              does, with no call into uWebSockets.js; refuses to start without the view;
 *   `table+view` the table and that read.
 * Default: none of these.
 */
import * as fs from "node:fs"
import { loadUws } from "../infra/http/HttpServer.js"
import { currentPeerView } from "../infra/http/PeerAddress.js"
import { scaleTable } from "./scale-links.js"

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

const LOCATION = Buffer.from("https://example.com/bench?utm_source=bench")
// Every argument as bytes, as the redirector's engine passes them (infra/http/UwsServer.ts):
// uWebSockets.js converts a string argument in a buffer of its own per call.
const FOUND = Buffer.from("302 Found")
const LOCATION_NAME = Buffer.from("Location")
const CACHE_CONTROL = Buffer.from("Cache-Control")
const NO_STORE = Buffer.from("private, no-store")
const mode = process.env.BARE_MODE ?? ""
const MODES = [
  "",
  "address",
  "table",
  "table+address",
  "syscall",
  "table+syscall",
  "table+buffer",
  "view",
  "table+view"
]
if (!MODES.includes(mode)) {
  process.stderr.write(`bench/bare-uws.ts: BARE_MODE must be one of ${MODES.slice(1).join(", ")}, not ${mode}\n`)
  process.exit(1)
}
const view = mode.includes("view") ? currentPeerView() : undefined
if (mode.includes("view") && view === undefined) {
  process.stderr.write(
    "bench/bare-uws.ts: BARE_MODE=view needs the peer-address library preloaded and its view built\n"
  )
  process.exit(1)
}
const readAddress = mode.includes("address")
const newBuffer = mode.includes("buffer")
const links = mode.includes("table") ? Number(process.env.BARE_LINKS ?? 1_000_000) : 0
const table = scaleTable(links)
let addressBytes = 0
const devNull = mode.includes("syscall") ? fs.openSync("/dev/null", "w") : -1
const oneByte = Buffer.alloc(1)

const app = uws.App().any("/*", (res, req) => {
  let location: Uint8Array = LOCATION
  if (links > 0) {
    const row = table.rowOf(req.getUrl())
    if (row >= 0) location = table.location(row)
  }
  if (readAddress) addressBytes += res.getRemoteAddress().byteLength
  if (view !== undefined) addressBytes += view[0] === 4 ? view[1]! & 1 : res.getRemoteAddress().byteLength
  if (devNull >= 0) fs.writeSync(devNull, oneByte, 0, 1)
  if (newBuffer) addressBytes += new ArrayBuffer(4).byteLength
  res.writeStatus(FOUND).writeHeader(LOCATION_NAME, location).writeHeader(CACHE_CONTROL, NO_STORE).end()
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
