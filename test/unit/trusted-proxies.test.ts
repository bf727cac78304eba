import { ConfigProvider, Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { appConfig } from "../../infra/AppConfig.js"
import type { HttpExchange } from "../../infra/http/HttpServer.js"
import {
  clientAddress,
  forwardedAddress,
  invalidTrustedProxy,
  makeTrustedProxies,
  NO_TRUSTED_PROXIES,
  trustedProxyEntries,
  visitorAddressOf
} from "../../infra/http/TrustedProxies.js"

const proxies = makeTrustedProxies(["10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1"])

describe("TRUSTED_PROXIES: the client address is the right-most X-Forwarded-For entry that is not a trusted proxy", () => {
  it("a peer that is not a trusted proxy is the client; its header is ignored", () => {
    expect(clientAddress(proxies, "203.0.113.9", "198.51.100.1")).toBe("203.0.113.9")
    expect(clientAddress(NO_TRUSTED_PROXIES, "10.0.0.1", "198.51.100.1")).toBe("10.0.0.1")
  })

  it("a trusted peer: the address it appended", () => {
    expect(clientAddress(proxies, "10.0.0.1", "198.51.100.1")).toBe("198.51.100.1")
    expect(clientAddress(proxies, "192.168.1.7", " 198.51.100.1 ")).toBe("198.51.100.1")
  })

  it("spoofed left-most entries are ignored: the walk stops at the first untrusted address from the right", () => {
    expect(clientAddress(proxies, "10.0.0.1", "1.1.1.1, 2.2.2.2, 198.51.100.1")).toBe("198.51.100.1")
    // Two proxies of ours in a row: the second appended the first's address.
    expect(clientAddress(proxies, "10.0.0.1", "1.1.1.1,198.51.100.1,10.0.0.2")).toBe("198.51.100.1")
    expect(clientAddress(proxies, "10.0.0.1", "198.51.100.1, 10.9.9.9, 192.168.1.7")).toBe("198.51.100.1")
  })

  it("every entry a trusted proxy: the left-most one; no header: the peer", () => {
    expect(clientAddress(proxies, "10.0.0.1", "10.1.1.1, 10.0.0.2")).toBe("10.1.1.1")
    expect(clientAddress(proxies, "10.0.0.1", "")).toBe("10.0.0.1")
  })

  it("IPv6: peers, ranges and entries (bracketed, with ports, in any spelling, IPv4-mapped)", () => {
    expect(clientAddress(proxies, "::1", "2001:DB8:0:0::1")).toBe("2001:db8::1")
    expect(clientAddress(proxies, "fd12::5", "[2001:db8::2]:443")).toBe("2001:db8::2")
    expect(clientAddress(proxies, "fd12::5", "2001:db8::3, fd00::9")).toBe("2001:db8::3")
    // node:http's dual-stack form of an IPv4 peer matches the IPv4 range.
    expect(clientAddress(proxies, "::ffff:10.0.0.1", "198.51.100.1")).toBe("198.51.100.1")
    expect(clientAddress(proxies, "10.0.0.1", "::ffff:198.51.100.4")).toBe("198.51.100.4")
    expect(clientAddress(proxies, "10.0.0.1", "198.51.100.5:51234")).toBe("198.51.100.5")
    expect(clientAddress(proxies, "2001:db8::9", "198.51.100.1")).toBe("2001:db8::9")
  })

  it("ranges match by prefix, IPv4 and IPv6 (any spelling, IPv4-mapped in either form)", () => {
    const ranges = makeTrustedProxies(["172.16.0.0/12", "2001:db8:abcd::/48", "0.0.0.0/32"])
    expect(
      ["172.16.0.1", "172.31.255.255", "::ffff:172.20.0.1", "::FFFF:ac14:1", "0.0.0.0"].map(ranges.contains)
    ).toEqual([true, true, true, true, true])
    expect(["172.32.0.0", "172.15.255.255", "0.0.0.1", "2001:db8:abce::1", "::1"].map(ranges.contains)).toEqual([
      false,
      false,
      false,
      false,
      false
    ])
    expect(ranges.contains("2001:DB8:ABCD:0:0:0:0:9")).toBe(true)
    expect(ranges.contains("2001:db8:abcd:ffff::")).toBe(true)
    expect(makeTrustedProxies(["::/0"]).contains("2001:db8::1")).toBe(true)
    expect(makeTrustedProxies(["0.0.0.0/0"]).contains("255.255.255.255")).toBe(true)
    expect(["1.2.3", "1.2.3.4.5", "256.1.1.1", "1..2.3", "1.2.3.4 ", "", "1.2.3.1234"].map(ranges.contains)).toEqual(
      Array(7).fill(false)
    )
  })

  it("a malformed entry stops the walk at the last trusted address, never its own text", () => {
    expect(clientAddress(proxies, "10.0.0.1", "198.51.100.1, unknown")).toBe("10.0.0.1")
    expect(clientAddress(proxies, "10.0.0.1", "198.51.100.1, 10.0.0.2, <script>")).toBe("10.0.0.1")
    expect(clientAddress(proxies, "10.0.0.1", "evil, 10.0.0.2")).toBe("10.0.0.2")
    expect(clientAddress(proxies, "10.0.0.1", "198.51.100.1,")).toBe("10.0.0.1")
    expect(clientAddress(proxies, "10.0.0.1", "999.1.1.1")).toBe("10.0.0.1")
    expect(forwardedAddress("1.2.3.4:")).toBeUndefined()
  })

  it("the setting: addresses and CIDR ranges, comma-separated; anything else is named", () => {
    expect(trustedProxyEntries(" 10.0.0.0/8, ,::1 ")).toEqual(["10.0.0.0/8", "::1"])
    expect(invalidTrustedProxy(["10.0.0.0/8", "fd00::/8", "127.0.0.1"])).toBeUndefined()
    for (const bad of ["10.0.0.0/33", "fd00::/129", "proxy.internal", "10.0.0.0/8/1", "10.0.0/8", "10.0.0.1/"]) {
      expect(invalidTrustedProxy(["::1", bad])).toBe(bad)
    }
  })

  it("read through AppConfig: unset is nobody; a bad value is a start-up error naming TRUSTED_PROXIES", () => {
    const read = (env: Record<string, string>) =>
      Effect.runSync(
        Effect.either(Effect.withConfigProvider(appConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))))
      )
    const unset = read({})
    expect(Either.isRight(unset) && unset.right.trustedProxies.entries).toEqual([])
    const set = read({ TRUSTED_PROXIES: "10.0.0.0/8,::1" })
    expect(Either.isRight(set) && set.right.trustedProxies.contains("10.2.3.4")).toBe(true)
    const bad = read({ TRUSTED_PROXIES: "10.0.0.0/8,proxy" })
    expect(Either.isLeft(bad) && String(bad.left)).toMatch(/TRUSTED_PROXIES.*comma-separated list of IP addresses/)
  })

  it("with no trusted proxy the hot path takes the socket peer as the engine gives it, and reads no header", () => {
    const raw = new Uint8Array([203, 0, 113, 9]).buffer
    const read: Array<string> = []
    const ex = {
      remoteAddressRaw: () => raw,
      header: (name: string) => {
        read.push(name)
        return "198.51.100.1"
      }
    } as unknown as HttpExchange
    expect(visitorAddressOf(NO_TRUSTED_PROXIES)(ex)).toBe(raw)
    // An untrusted peer: its header is not even read, its address not even formatted.
    expect(visitorAddressOf(proxies)(ex)).toBe(raw)
    expect(read).toEqual([])
    const fromProxy = { ...ex, remoteAddressRaw: () => new Uint8Array([10, 0, 0, 1]).buffer } as HttpExchange
    expect(visitorAddressOf(proxies)(fromProxy)).toBe("198.51.100.1")
    expect(read).toEqual(["x-forwarded-for"])
    // An IPv4 peer as a number (uWebSockets.js with the peer-address library): the same rules.
    const asNumber = (value: number) => ({ ...ex, remoteAddressRaw: () => value }) as HttpExchange
    expect(visitorAddressOf(proxies)(asNumber(203 * 2 ** 24 + 113 * 256 + 9))).toBe(203 * 2 ** 24 + 113 * 256 + 9)
    expect(read).toEqual(["x-forwarded-for"])
    expect(visitorAddressOf(proxies)(asNumber(10 * 2 ** 24 + 1))).toBe("198.51.100.1")
    expect(read).toEqual(["x-forwarded-for", "x-forwarded-for"])
  })
})
