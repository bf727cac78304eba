import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** Read once: the path infra/http/peer-address.c is loaded from in this process; undefined when it is not. */
let library: { readonly path: string | undefined } | undefined
const preloadedLibrary = (): string | undefined => {
  if (library === undefined) {
    try {
      const line = fs
        .readFileSync("/proc/self/maps", "utf8")
        .split("\n")
        .find((l) => l.endsWith("/peer-address.so"))
      library = { path: line?.slice(line.indexOf("/")) }
    } catch {
      library = { path: undefined }
    }
  }
  return library.path
}

/**
 * Whether infra/http/peer-address.c is loaded into this process (scripts/redirector.sh preloads
 * it unless REDIRECTOR_PEER_CACHE=off): then a peer's address is read once per connection, at
 * accept, and every later read (uWebSockets.js reads it per request) is answered without a
 * system call. For the redirector's start-up line.
 */
export const peerAddressCacheLoaded = (): boolean => preloadedLibrary() !== undefined

/**
 * The calling thread's current peer, as peer-address.c notes it on every read (`recv`, `read`,
 * …): element 0 is 4 when element 1 holds the IPv4 address (a.b.c.d as a * 2^24 + … + d) of
 * the accepted connection this thread last read, 0 otherwise. Only a request handler that
 * uWebSockets.js calls on what it just read may take it as its own connection's peer
 * (UwsServer.ts does, and only then). Undefined without the library or its addon
 * (infra/http/peer-address-view.c, built beside it by scripts/peer-address.sh where node's
 * headers are). Loaded once per thread (each worker thread has its own module and note).
 */
let view: { readonly current: Uint32Array | undefined } | undefined
export const currentPeerView = (): Uint32Array | undefined => {
  if (view === undefined) view = { current: loadView() }
  return view.current
}

const loadView = (): Uint32Array | undefined => {
  const library = preloadedLibrary()
  if (library === undefined) return undefined
  const addon = path.join(path.dirname(library), "peer-address-view.node")
  if (!fs.existsSync(addon)) return undefined
  const module = { exports: {} as { current?: ArrayBuffer } }
  try {
    process.dlopen(module, addon, os.constants.dlopen.RTLD_NOW)
  } catch {
    return undefined
  }
  const current = module.exports.current
  return current instanceof ArrayBuffer && current.byteLength === 8 ? new Uint32Array(current) : undefined
}

/** How this process reads its peers' addresses: for the redirector's start-up line. */
export const peerAddressReading = (): string =>
  currentPeerView() !== undefined
    ? "noted at each read (peer-address.so and its view)"
    : peerAddressCacheLoaded()
      ? "kept per connection (peer-address.so)"
      : "read per click"
