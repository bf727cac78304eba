import { describe, expect, it } from "vitest"
import { type AddressClass, classifyAddress, isPublicAddress, urlHost } from "../../domain/AddressPolicy.js"

/** The class of the host of `http://<host>/` after WHATWG URL parsing. */
const hostClass = (host: string): AddressClass | "name" => {
  const parsed = urlHost(new URL(`http://${host}/`))
  return parsed._tag === "Name" ? "name" : classifyAddress(parsed.address)
}

// [how the host is written in a URL, expected class]
const REFUSED_IPV4: ReadonlyArray<readonly [string, AddressClass]> = [
  // loopback in every spelling the URL parser accepts
  ["127.0.0.1", "loopback"],
  ["2130706433", "loopback"],
  ["0177.0.0.1", "loopback"],
  ["0177.0000.0000.0001", "loopback"],
  ["0x7f.1", "loopback"],
  ["0X7F.0.0.1", "loopback"],
  ["0x7f000001", "loopback"],
  ["017700000001", "loopback"],
  ["127.1", "loopback"],
  ["127.0.1", "loopback"],
  ["127.0x0.1", "loopback"],
  ["127.0.0.1.", "loopback"],
  ["0x7f.1.", "loopback"],
  ["%31%32%37.0.0.1", "loopback"],
  ["\uff11\uff12\uff17.\uff10.\uff10.\uff11", "loopback"],
  ["127.255.255.254", "loopback"],
  // unspecified, "this network"
  ["0.0.0.0", "unspecified"],
  ["0", "unspecified"],
  ["0x0", "unspecified"],
  ["0.1.2.3", "unspecified"],
  // RFC 1918
  ["10.0.0.1", "private"],
  ["012.0.0.1", "private"],
  ["0xa.0.0.1", "private"],
  ["167772161", "private"],
  ["10.1", "private"],
  ["10.255.255.255", "private"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private"],
  ["0xac100001", "private"],
  ["192.168.1.1", "private"],
  ["0xc0a80101", "private"],
  ["3232235777", "private"],
  ["192.168.257", "private"],
  // CGNAT
  ["100.64.0.1", "shared"],
  ["100.127.255.255", "shared"],
  // link-local and the cloud metadata address
  ["169.254.169.254", "link-local"],
  ["2852039166", "link-local"],
  ["0xa9.0xfe.0xa9.0xfe", "link-local"],
  ["0251.0376.0251.0376", "link-local"],
  ["0xa9fea9fe", "link-local"],
  ["169.254.43518", "link-local"],
  ["169.254.0.1", "link-local"],
  // multicast, broadcast, reserved
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["255.255.255.255", "broadcast"],
  ["4294967295", "broadcast"],
  ["0xffffffff", "broadcast"],
  ["240.0.0.1", "reserved"],
  ["254.1.2.3", "reserved"],
  ["192.88.99.1", "reserved"],
  // benchmarking, documentation, IETF protocol assignments
  ["198.18.0.1", "benchmarking"],
  ["198.19.255.255", "benchmarking"],
  ["192.0.2.1", "documentation"],
  ["198.51.100.7", "documentation"],
  ["203.0.113.9", "documentation"],
  ["192.0.0.8", "protocol-assignment"],
  ["192.0.0.170", "protocol-assignment"]
]

const REFUSED_IPV6: ReadonlyArray<readonly [string, AddressClass]> = [
  ["[::]", "unspecified"],
  ["[0:0:0:0:0:0:0:0]", "unspecified"],
  ["[::0]", "unspecified"],
  ["[::1]", "loopback"],
  ["[0:0:0:0:0:0:0:1]", "loopback"],
  ["[0000::0001]", "loopback"],
  // IPv4-mapped, in dotted, hex and long spellings, private or not
  ["[::ffff:127.0.0.1]", "ipv4-mapped"],
  ["[::ffff:7f00:1]", "ipv4-mapped"],
  ["[0:0:0:0:0:ffff:127.0.0.1]", "ipv4-mapped"],
  ["[0:0:0:0:0:FFFF:7F00:0001]", "ipv4-mapped"],
  ["[::FFFF:169.254.169.254]", "ipv4-mapped"],
  ["[::ffff:a9fe:a9fe]", "ipv4-mapped"],
  ["[::ffff:10.0.0.1]", "ipv4-mapped"],
  ["[::ffff:0:0]", "ipv4-mapped"],
  ["[::ffff:8.8.8.8]", "ipv4-mapped"],
  // IPv4-compatible (deprecated)
  ["[::127.0.0.1]", "ipv4-compatible"],
  ["[::7f00:1]", "ipv4-compatible"],
  ["[::10.0.0.1]", "ipv4-compatible"],
  ["[::169.254.169.254]", "ipv4-compatible"],
  ["[::8.8.8.8]", "ipv4-compatible"],
  // scoped and local
  ["[fe80::1]", "link-local"],
  ["[FE80::abcd:1]", "link-local"],
  ["[febf:ffff::1]", "link-local"],
  ["[fec0::1]", "site-local"],
  ["[feff::1]", "site-local"],
  ["[fc00::1]", "unique-local"],
  ["[fd12:3456:789a::1]", "unique-local"],
  ["[ff02::1]", "multicast"],
  ["[ff0e::101]", "multicast"],
  // IPv4 embedded in translation prefixes: judged by the embedded address
  ["[64:ff9b::127.0.0.1]", "nat64"],
  ["[64:ff9b::a9fe:a9fe]", "nat64"],
  ["[64:ff9b::10.0.0.1]", "nat64"],
  ["[64:ff9b::c0a8:101]", "nat64"],
  ["[2002:7f00:1::]", "6to4"],
  ["[2002:a9fe:a9fe::1]", "6to4"],
  ["[2002:c0a8:101::]", "6to4"],
  ["[2002:a00:1:1::1]", "6to4"],
  ["[2001::1]", "teredo"],
  ["[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "teredo"],
  // special purpose and not global unicast
  ["[2001:db8::1]", "documentation"],
  ["[3fff::1]", "documentation"],
  ["[2001:2::1]", "benchmarking"],
  ["[2001:10::1]", "protocol-assignment"],
  ["[2001:1::1]", "protocol-assignment"],
  ["[64:ff9b:1::a00:1]", "reserved"],
  ["[100::1]", "reserved"],
  ["[::ffff:0:7f00:1]", "reserved"],
  ["[4000::1]", "reserved"],
  ["[1::1]", "reserved"]
]

const PUBLIC: ReadonlyArray<string> = [
  "8.8.8.8",
  "0x08080808",
  "134744072",
  "010.010.010.010",
  "8.8.2056",
  "1.1.1.1",
  "93.184.215.14",
  "11.0.0.1",
  "100.63.255.255",
  "100.128.0.1",
  "126.255.255.255",
  "128.0.0.1",
  "169.253.255.255",
  "169.255.0.1",
  "172.15.255.255",
  "172.32.0.1",
  "192.0.1.1",
  "192.0.3.1",
  "192.31.196.1",
  "192.167.255.255",
  "192.169.0.1",
  "198.17.255.255",
  "198.20.0.1",
  "223.255.255.255",
  "[2606:4700:4700::1111]",
  "[2001:4860:4860::8888]",
  "[2a00:1450:4001:80b::200e]",
  "[2620:fe::fe]",
  "[64:ff9b::8.8.8.8]",
  "[64:ff9b::808:808]",
  "[2002:808:808::1]",
  "[2001:200::1]",
  "[3ffe::1]"
]

describe("address policy: literal hosts in URLs", () => {
  it.each(REFUSED_IPV4)("refuses http://%s/ as %s", (host, kind) => {
    expect(hostClass(host)).toBe(kind)
  })

  it.each(REFUSED_IPV6)("refuses http://%s/ as %s", (host, kind) => {
    expect(hostClass(host)).toBe(kind)
  })

  it.each(PUBLIC)("allows the public address http://%s/", (host) => {
    expect(hostClass(host)).toBe("public")
  })

  it("reads every IPv4 spelling as the dotted address the URL parser normalizes it to", () => {
    for (const host of ["2130706433", "0177.0.0.1", "0x7f.1", "127.1", "127.0.0.1.", "%31%32%37.0.0.1"]) {
      expect(urlHost(new URL(`http://${host}:8080/x`))).toEqual({ _tag: "Address", family: 4, address: "127.0.0.1" })
    }
    expect(urlHost(new URL("http://[0:0:0:0:0:ffff:127.0.0.1]/"))).toEqual({
      _tag: "Address",
      family: 6,
      address: "::ffff:7f00:1"
    })
  })

  it("treats hosts that are not addresses as names to resolve, including localhost and a doubled trailing dot", () => {
    for (const [host, name] of [
      ["example.com", "example.com"],
      ["EXAMPLE.com.", "example.com."],
      ["localhost", "localhost"],
      ["127.0.0.1..", "127.0.0.1.."],
      ["0x7f.1x", "0x7f.1x"],
      ["xn--bcher-kva.example", "xn--bcher-kva.example"]
    ] as const) {
      expect(urlHost(new URL(`http://${host}/`))).toEqual({ _tag: "Name", name })
    }
  })

  it("cannot be given an address the URL parser rejects: zone ids, out-of-range and malformed literals", () => {
    for (const bad of [
      "http://[fe80::1%25eth0]/",
      "http://[fe80::1%eth0]/",
      "http://[::1%251]/",
      "http://1.2.3.4.5/",
      "http://256.0.0.1/",
      "http://4294967296/",
      "http://0x100000000/",
      "http://example.0x7f/",
      "http://[::ffff:127.0.0.1.1]/",
      "http://[1:2:3:4:5:6:7:8:9]/",
      "http://[::1/"
    ]) {
      expect(() => new URL(bad), bad).toThrow()
    }
  })
})

describe("address policy: resolver answers", () => {
  it.each<readonly [string, AddressClass]>([
    ["127.0.0.1", "loopback"],
    ["::1", "loopback"],
    ["::ffff:169.254.169.254", "ipv4-mapped"],
    ["::ffff:127.0.0.1", "ipv4-mapped"],
    ["169.254.169.254", "link-local"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "scoped"],
    ["2001:db8::1%2", "scoped"],
    ["10.0.0.1", "private"],
    ["fd00::1", "unique-local"],
    ["64:ff9b::a9fe:a9fe", "nat64"],
    ["0x7f.1", "loopback"],
    ["2130706433", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"]
  ])("classifies %s as %s", (ip, kind) => {
    expect(classifyAddress(ip)).toBe(kind)
    expect(isPublicAddress(ip)).toBe(false)
  })

  it("refuses strings that are not exactly one address", () => {
    for (const bad of [
      "",
      "example.com",
      "localhost",
      "1.2.3.4.5",
      "256.1.1.1",
      "8.8.8.8/24",
      "8.8.8.8:80",
      "8.8.8.8@127.0.0.1",
      "[::1]",
      "::1::2",
      "1:2:3:4:5:6:7:8:9",
      "8.8.8.8 ",
      " 8.8.8.8",
      "gggg::1"
    ]) {
      expect(classifyAddress(bad), JSON.stringify(bad)).toBe("not-an-address")
      expect(isPublicAddress(bad)).toBe(false)
    }
  })

  it("allows public unicast answers in both families", () => {
    for (const ip of [
      "8.8.8.8",
      "93.184.215.14",
      "2606:4700:4700::1111",
      "2a00:1450:4001:80b::200e",
      "64:ff9b::808:808"
    ]) {
      expect(classifyAddress(ip), ip).toBe("public")
      expect(isPublicAddress(ip)).toBe(true)
    }
  })

  it("judges range boundaries bit by bit: the last address inside each IPv4 range is refused, the next one allowed", () => {
    for (const [inside, outside] of [
      ["10.255.255.255", "11.0.0.0"],
      ["100.127.255.255", "100.128.0.0"],
      ["127.255.255.255", "128.0.0.0"],
      ["169.254.255.255", "169.255.0.0"],
      ["172.31.255.255", "172.32.0.0"],
      ["192.0.0.255", "192.0.1.0"],
      ["192.0.2.255", "192.0.3.0"],
      ["192.168.255.255", "192.169.0.0"],
      ["198.19.255.255", "198.20.0.0"],
      ["203.0.113.255", "203.0.114.0"]
    ] as const) {
      expect(isPublicAddress(inside), inside).toBe(false)
      expect(isPublicAddress(outside), outside).toBe(true)
    }
    expect(isPublicAddress("223.255.255.255")).toBe(true)
    expect(isPublicAddress("224.0.0.0")).toBe(false)
    expect(isPublicAddress("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")).toBe(false)
    expect(isPublicAddress("2000::")).toBe(true)
    expect(isPublicAddress("3fff:fff::1")).toBe(false)
    expect(isPublicAddress("3fff:1000::1")).toBe(true)
    expect(isPublicAddress("2001:1ff::1")).toBe(false)
    expect(isPublicAddress("2001:200::1")).toBe(true)
  })
})
