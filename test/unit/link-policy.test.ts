import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { decodeCursor, encodeCursor } from "../../apps/api/Shared.js"
import { CustomSlug, DestinationUrl, isReservedSlug } from "../../domain/Link.js"
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
