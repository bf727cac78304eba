/**
 * The baseline of the redirect benchmark: a bare uWebSockets.js server that answers every
 * request with the same 302 the redirector sends (Location and Cache-Control), with no slug
 * table, no click capture and no Effect. What uWS alone costs on this machine.
 *
 *   node --import tsx bench/bare-uws.ts [port]     (or BARE_PORT; default 18491)
 *
 * It loads the same native binary as the redirector and refuses to start without it, so the
 * comparison never silently measures a fallback.
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

const app = uws.App().any("/*", (res) => {
  res.writeStatus("302 Found").writeHeader("Location", LOCATION).writeHeader("Cache-Control", "private, no-store").end()
})

app.listen("0.0.0.0", port, (socket) => {
  if (socket === false) {
    process.stderr.write(`bench/bare-uws.ts: could not listen on 0.0.0.0:${port}\n`)
    process.exit(1)
  }
  process.stdout.write(`bare uWS 302 server listening on 0.0.0.0:${uws.us_socket_local_port(socket as never)}\n`)
  const stop = () => {
    uws.us_listen_socket_close(socket)
    process.exit(0)
  }
  process.on("SIGINT", stop)
  process.on("SIGTERM", stop)
})
