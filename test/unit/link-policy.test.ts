import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { decodeCursor, encodeCursor } from "../../apps/api/Shared.js"
import {
  CustomSlug,
  DestinationUrl,
  effectivePort,
  isLoopbackHost,
  isReservedSlug,
  isUriCharacters
} from "../../domain/Link.js"
import { isPresetId } from "../../domain/UtmPreset.js"
import { newSlug } from "../../infra/Ids.js"

const validUrl = Schema.decodeUnknownEither(DestinationUrl)
const validSlug = Schema.decodeUnknownEither(CustomSlug)

describe("destination URL policy", () => {
  it("accepts absolute http and https URLs up to 2048 characters", () => {
    expect(Either.isRight(validUrl("https://example.com/a?b=c#d"))).toBe(true)
    expect(Either.isRight(validUrl("http://127.0.0.1:8080/"))).toBe(true)
    const exact = `https://example.com/${"a".repeat(2048 - 20)}`
    expect(exact.length).toBe(2048)
    expect(Either.isRight(validUrl(exact))).toBe(true)
    expect(Either.isLeft(validUrl(`${exact}a`))).toBe(true)
  })

  it("rejects other schemes, relative URLs, whitespace and control characters", () => {
    for (const bad of [
      "ftp://example.com/",
      "javascript:alert(1)",
      "mailto:a@b.c",
      "data:text/html,hi",
      "/relative",
      "example.com",
      "https://",
      "https://exa mple.com/",
      "https://example.com/\r\nSet-Cookie:x",
      "",
      " https://example.com"
    ]) {
      expect(Either.isLeft(validUrl(bad)), bad).toBe(true)
    }
  })
})

describe("destination URLs must be RFC 3986 URIs", () => {
  it("rejects characters outside RFC 3986 and bad percent-escapes, with a detail that says what to do", () => {
    for (const bad of [
      "https://example.com/a|b",
      'https://example.com/"quoted"',
      "https://example.com/%zz",
      "https://example.com/%",
      "https://example.com/%4g",
      "https://example.com/{x}",
      "https://example.com/<script>",
      "https://example.com/a\\b",
      "https://example.com/a^b",
      "https://example.com/a`b",
      "https://bücher.de/x",
      "https://example.com/\u{1F600}",
      "https://example.com/?q=\u00e9"
    ]) {
      const result = validUrl(bad)
      expect(Either.isLeft(result), bad).toBe(true)
      if (Either.isLeft(result)) expect(result.left.message, bad).toMatch(/must be a URI \(RFC 3986\): percent-encode/)
    }
  })

  it("keeps accepting every RFC 3986 form: queries, fragments, ports, IPv6 literals, escapes, sub-delims", () => {
    for (const ok of [
      "https://example.com/a?b=c&d=e#f",
      "http://example.com:8080/",
      "https://[2001:db8::1]:8443/x",
      "https://example.com/b%C3%BCcher%2F",
      "https://xn--bcher-kva.de/",
      "https://example.com/~a-b_c.d",
      "https://example.com/'()*!$&+,;=:@?'()*!$&+,;=:@/?#'()*!$&+,;=:@/?"
    ]) {
      expect(Either.isRight(validUrl(ok)), ok).toBe(true)
    }
    // RFC 3986 allows userinfo, the link policy does not: every visitor would receive it.
    for (const withCredentials of [
      "https://user:pw@example.com/",
      "https://user@example.com/",
      "https://@example.com/"
    ]) {
      const result = validUrl(withCredentials)
      expect(Either.isLeft(result), withCredentials).toBe(true)
      if (Either.isLeft(result)) expect(result.left.message).toMatch(/must not contain credentials/)
    }
    expect(isUriCharacters("%41%7e")).toBe(true)
    expect(isUriCharacters("%4")).toBe(false)
  })
})

describe("loopback hosts (after WHATWG URL normalization)", () => {
  const hostOf = (url: string) => new URL(url).hostname
  it("recognizes localhost, 127.0.0.0/8 in any notation, [::1], IPv4-mapped loopback and unspecified addresses", () => {
    for (const url of [
      "http://localhost/",
      "http://LocalHost./",
      "http://a.b.localhost/",
      "http://127.0.0.1/",
      "http://127.255.255.254/",
      "http://2130706433/",
      "http://0x7f000001/",
      "http://0177.0.0.1/",
      "http://127.1/",
      "http://[::1]/",
      "http://[0:0:0:0:0:0:0:1]/",
      "http://[::ffff:127.0.0.1]/",
      "http://[::ffff:127.9.8.7]/",
      "http://0.0.0.0/",
      "http://0/",
      "http://[::]/"
    ]) {
      expect(isLoopbackHost(hostOf(url)), url).toBe(true)
    }
  })

  it("does not take other hosts for loopback", () => {
    for (const url of [
      "http://example.com/",
      "http://localhost.example.com/",
      "http://mylocalhost/",
      "http://128.0.0.1/",
      "http://10.0.0.1/",
      "http://[::2]/",
      "http://[::ffff:10.0.0.1]/",
      "http://[fe80::1]/",
      "http://127.0.0.1.nip.io/"
    ]) {
      expect(isLoopbackHost(hostOf(url)), url).toBe(false)
    }
  })

  it("effective ports default by scheme", () => {
    expect(effectivePort(new URL("http://a/"))).toBe(80)
    expect(effectivePort(new URL("https://a/"))).toBe(443)
    expect(effectivePort(new URL("https://a:80/"))).toBe(80)
    expect(effectivePort(new URL("http://a:8080/"))).toBe(8080)
  })
})

describe("preset ids", () => {
  it("only the shape the service issues is a preset id", () => {
    expect(isPresetId("utmp_0123456789ABCDEFabcdef")).toBe(true)
    for (const bad of [
      "",
      "utmp_",
      "utmp_\u0000",
      "utmp_a\u0000b",
      `utmp_${"a".repeat(65)}`,
      "utmp_a-b",
      "UTMP_abc",
      "link_abc"
    ]) {
      expect(isPresetId(bad), JSON.stringify(bad)).toBe(false)
    }
  })
})

describe("slug policy", () => {
  it("custom slugs are 4 to 32 characters of A-Z a-z 0-9 _ -", () => {
    for (const ok of ["abcd", "A_b-9", "x".repeat(32)]) expect(Either.isRight(validSlug(ok)), ok).toBe(true)
    for (const bad of ["abc", "x".repeat(33), "a b c", "abc/", "ab.c", "ünï", ""]) {
      expect(Either.isLeft(validSlug(bad)), bad).toBe(true)
    }
  })

  it("reserved slugs are matched whatever their case", () => {
    expect(isReservedSlug("healthz")).toBe(true)
    expect(isReservedSlug("HealthZ")).toBe(true)
    expect(isReservedSlug("hello")).toBe(false)
  })

  it("generated slugs are 7 base62 characters and do not repeat", () => {
    const seen = new Set<string>()
    for (let i = 0; i < 20_000; i++) {
      const slug = newSlug()
      expect(slug).toMatch(/^[0-9A-Za-z]{7}$/)
      seen.add(slug)
    }
    expect(seen.size).toBe(20_000)
  })
})

describe("cursors", () => {
  it("round-trip and reject anything they did not produce", () => {
    expect(decodeCursor(encodeCursor(123n))).toBe(123n)
    for (const bad of ["", "abc", "!!!!", Buffer.from("v1:x").toString("base64url"), "a".repeat(100)]) {
      expect(decodeCursor(bad), bad).toBeUndefined()
    }
  })
})
