import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { hostOfHeader, normalizeHostname, proofError, recordName } from "../../domain/Domain.js"

const own = ["sho.rt", "api.example.com", "img.example.com"]
const rule = (input: string) => {
  const r = normalizeHostname(input, own)
  return Either.isLeft(r) ? r.left.rule : r.right
}

describe("hostname policy (domain/Domain.ts)", () => {
  it("normalises: trims, lower-cases, converts international names to punycode", () => {
    expect(rule("  Go.Example.ORG ")).toBe("go.example.org")
    expect(rule("Bücher.example")).toBe("xn--bcher-kva.example")
    expect(rule("xn--bcher-kva.example")).toBe("xn--bcher-kva.example")
    expect(rule("a-b.c-d.example")).toBe("a-b.c-d.example")
  })

  it.each([
    ["", "not_empty"],
    ["   ", "not_empty"],
    ["http://go.example.org", "valid_characters"],
    ["go.example.org/path", "valid_characters"],
    ["user@go.example.org", "valid_characters"],
    ["go example.org", "valid_characters"],
    ["*.example.org", "no_wildcard"],
    ["go.*.org", "no_wildcard"],
    ["[2001:db8::1]", "no_ip_literal"],
    ["2001:db8::1", "no_ip_literal"],
    ["go.example.org:443", "no_port"],
    ["go.example.org.", "no_trailing_dot"],
    ["10.0.0.1", "no_ip_literal"],
    ["0x7f.1", "no_ip_literal"],
    ["example.123", "no_ip_literal"],
    ["localhost", "at_least_two_labels"],
    ["a..example.org", "label_length"],
    [`${"x".repeat(64)}.org`, "label_length"],
    [`${"abcdefghi.".repeat(25)}org`, "total_length"],
    [`${"abcdefghi.".repeat(23)}example.org`, "total_length"],
    ["-go.example.org", "label_characters"],
    ["go-.example.org", "label_characters"],
    ["go_x.example.org", "label_characters"],
    ["sho.rt", "not_own_host"],
    ["SHO.RT", "not_own_host"],
    ["deep.links.sho.rt", "not_own_host"],
    ["api.example.com", "not_own_host"]
  ])("refuses %j by rule %s", (input, expected) => {
    expect(rule(input)).toBe(expected)
  })

  it("allows a sibling of an own host and a name merely ending like one", () => {
    expect(rule("example.com")).toBe("example.com")
    expect(rule("notsho.rt")).toBe("notsho.rt")
  })

  it("names the proof record and reads a lookup as last_error", () => {
    expect(recordName("go.example.org")).toBe("_shortlinks-challenge.go.example.org")
    expect(proofError({ _tag: "Found", values: ["a", "tok"] }, "tok")).toBeNull()
    expect(proofError({ _tag: "Found", values: ["other"] }, "tok")).toBe("TXT present but value differs")
    expect(proofError({ _tag: "NoRecord" }, "tok")).toBe("no TXT record")
    expect(proofError({ _tag: "Timeout" }, "tok")).toBe("timeout")
    expect(proofError({ _tag: "Failed", reason: "ESERVFAIL" }, "tok")).toBe("DNS lookup failed: ESERVFAIL")
  })

  it("matches a Host header case-insensitively without its port or trailing dot", () => {
    expect(hostOfHeader("Go.Example.ORG:8443")).toBe("go.example.org")
    expect(hostOfHeader("go.example.org.")).toBe("go.example.org")
    expect(hostOfHeader("[::1]:8081")).toBe("[::1]")
    expect(hostOfHeader("")).toBe("")
  })
})
