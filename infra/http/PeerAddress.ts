import * as fs from "node:fs"

/**
 * Whether infra/http/peer-address.c is loaded into this process (scripts/redirector.sh preloads
 * it unless REDIRECTOR_PEER_CACHE=off): then a peer's address is read once per connection, at
 * accept, and every later read (uWebSockets.js reads it per request) is answered without a
 * system call. For the redirector's start-up line.
 */
export const peerAddressCacheLoaded = (): boolean => {
  try {
    return fs.readFileSync("/proc/self/maps", "utf8").includes("/peer-address.so")
  } catch {
    return false
  }
}
