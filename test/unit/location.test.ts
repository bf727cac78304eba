import { describe, expect, it } from "vitest"
import { mergeUtm, PLAIN_HTTP_URL, prepareLocation, visibleAscii } from "../../apps/redirector/Location.js"
import { isHttpUrl } from "../../domain/Link.js"

describe("UTM merge", () => {
  it("appends the link's UTM parameters in the fixed order when the destination has no query", () => {
    expect(mergeUtm("https://example.com/p", { utm_medium: "email", utm_source: "news" })).toBe(
      "https://example.com/p?utm_source=news&utm_medium=email"
    )
  })

  it("keeps parameters the destination already has and adds only the missing ones", () => {
    expect(mergeUtm("https://example.com/p?utm_source=own&x=1", { utm_source: "link", utm_campaign: "spring" })).toBe(
      "https://example.com/p?utm_source=own&x=1&utm_campaign=spring"
    )
  })

  it("treats a parameter without a value, or percent-encoded in its name, as present", () => {
    expect(mergeUtm("https://e.com/?utm_source", { utm_source: "a" })).toBe("https://e.com/?utm_source")
    expect(mergeUtm("https://e.com/?utm%5Fsource=x", { utm_source: "a" })).toBe("https://e.com/?utm%5Fsource=x")
    expect(mergeUtm("https://e.com/?utm_source=", { utm_source: "a", utm_term: "t" })).toBe(
      "https://e.com/?utm_source=&utm_term=t"
    )
  })

  it("inserts before the fragment and leaves the fragment as it was", () => {
    expect(mergeUtm("https://e.com/a?b=1#sec?utm_source=frag", { utm_source: "s" })).toBe(
      "https://e.com/a?b=1&utm_source=s#sec?utm_source=frag"
    )
    expect(mergeUtm("https://e.com/a#top", { utm_medium: "m" })).toBe("https://e.com/a?utm_medium=m#top")
  })

  it("adds no separator after an empty query or a trailing &", () => {
    expect(mergeUtm("https://e.com/?", { utm_source: "s" })).toBe("https://e.com/?utm_source=s")
    expect(mergeUtm("https://e.com/?a=1&", { utm_source: "s" })).toBe("https://e.com/?a=1&utm_source=s")
  })

  it("percent-encodes UTM values, including &, =, # and spaces", () => {
    expect(mergeUtm("https://e.com/", { utm_campaign: "a&b=c #1 été" })).toBe(
      "https://e.com/?utm_campaign=a%26b%3Dc%20%231%20%C3%A9t%C3%A9"
    )
  })

  it("leaves the destination byte for byte when there is nothing to add", () => {
    const odd = "https://E.com:443/a/../b?%7e=1&&x#y"
    expect(mergeUtm(odd, null)).toBe(odd)
    expect(mergeUtm(odd, {})).toBe(odd)
  })
})

describe("Location safety", () => {
  it("percent-encodes CR, LF and every other control character, so no header can be injected", () => {
    const location = prepareLocation("https://e.com/a\r\nSet-Cookie: x=1\u0000\t\u007f", null)!
    expect(location).toBe("https://e.com/a%0D%0ASet-Cookie:%20x=1%00%09%7F")
    expect(location).toMatch(/^[\x21-\x7e]+$/)
  })

  it("percent-encodes non-ASCII as UTF-8 bytes, lone surrogates as U+FFFD", () => {
    expect(visibleAscii("https://e.com/é/日")).toBe("https://e.com/%C3%A9/%E6%97%A5")
    expect(visibleAscii("https://e.com/\ud800")).toBe("https://e.com/%EF%BF%BD")
  })

  it("encodes UTM values that carry line breaks too", () => {
    const location = prepareLocation("https://e.com/", { utm_source: "a\r\nb\ud83d" })!
    expect(location).toBe("https://e.com/?utm_source=a%0D%0Ab%EF%BF%BD")
  })

  it("leaves an already valid URL unchanged (existing escapes are not double-encoded)", () => {
    const url = "https://e.com/a%20b?q=%E2%82%AC&r=1#f"
    expect(prepareLocation(url, null)).toBe(url)
  })

  it("refuses destinations that are not absolute http(s) URLs", () => {
    for (const bad of ["javascript:alert(1)", "//e.com/", "data:text/html,x", " https://e.com/", "ftp://e.com/"]) {
      expect(prepareLocation(bad, null), bad).toBeNull()
    }
  })
})

describe("the plain-URL fast path of the load", () => {
  it("accepts only what the URL parser's check accepts", () => {
    const cases = [
      "https://example.com/scale/1",
      "http://a-b.c0.example?x=1#f",
      "https://Example.COM",
      "https://a.b.c/%zz\\x",
      "https://1.2.3.4/",
      "https://999.1.1.1/",
      "https://0x10/",
      "https://host:8080/p",
      "https://user@host/",
      "https://exa mple.com/",
      "https://example.com./",
      "https://a..b/",
      "ftp://example.com/",
      "https:///path",
      "https://ex%41mple.com/",
      "https://example.com/ space"
    ]
    for (const url of cases) {
      if (PLAIN_HTTP_URL.test(url)) expect(isHttpUrl(url), url).toBe(true)
    }
    expect(PLAIN_HTTP_URL.test("https://example.com/scale/1")).toBe(true)
    expect(PLAIN_HTTP_URL.test("https://999.1.1.1/")).toBe(false)
    expect(prepareLocation("https://999.1.1.1/", null)).toBeNull()
    expect(prepareLocation("https://1.2.3.4/x", null)).toBe("https://1.2.3.4/x")
  })
})
