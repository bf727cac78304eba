// The cost of TRUSTED_PROXIES per click (visitorAddressOf, infra/http/TrustedProxies.ts), in-process,
// against the bare socket peer: `npx tsx bench/trusted-proxies.ts`. Noisy machines: compare the lines of one run.
import {
  clientAddress,
  makeTrustedProxies,
  NO_TRUSTED_PROXIES,
  visitorAddressOf
} from "../infra/http/TrustedProxies.js"

const proxies = makeTrustedProxies(["10.0.0.0/8", "127.0.0.1"])
const raw = new Uint8Array([10, 0, 0, 1]).buffer
const direct = new Uint8Array([203, 0, 113, 9]).buffer
const mk = (r: ArrayBuffer) => ({ remoteAddressRaw: () => r, header: () => "1.1.1.1, 198.51.100.7" }) as never
const time = (name: string, f: () => unknown, n = 2_000_000) => {
  for (let i = 0; i < 100_000; i++) f()
  const t = process.hrtime.bigint()
  for (let i = 0; i < n; i++) f()
  const ns = Number(process.hrtime.bigint() - t) / n
  console.log(`${name}: ${ns.toFixed(1)} ns/call`)
}
const exProxy = mk(raw),
  exDirect = mk(direct)
const none = visitorAddressOf(NO_TRUSTED_PROXIES),
  some = visitorAddressOf(proxies)
time("TRUSTED_PROXIES unset (socket peer)", () => none(exDirect))
time("baseline ex.remoteAddressRaw()", () => (exDirect as { remoteAddressRaw(): ArrayBuffer }).remoteAddressRaw())
time("set, untrusted peer", () => some(exDirect))
time("set, trusted peer, 2-entry XFF", () => some(exProxy))
time("clientAddress only", () => clientAddress(proxies, "10.0.0.1", "1.1.1.1, 198.51.100.7"))
