import { describe, expect, it } from "vitest"
import {
  cachedUserAgentParser,
  countryOf,
  dayString,
  isPreviewFetcher,
  normalizeIp,
  parseUserAgent,
  referrerHost,
  utcDay,
  visitorHash
} from "../../apps/redirector/ClickClassify.js"
import { ipText } from "../../infra/http/HttpServer.js"

const UA = {
  chromeWindows:
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
  safariIphone:
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
  safariIpad:
    "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1",
  firefoxLinux: "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
  edge: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.51",
  chromeAndroid:
    "Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
  samsungTv:
    "Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/4.0 Chrome/76.0.3809.146 TV Safari/537.36",
  facebookInApp:
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/460.0.0.38.108]",
  slackDesktop:
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Slack/4.36.140 Chrome/120.0.6099.291 Electron/28.2.2 Safari/537.36",
  telegramInApp:
    "Mozilla/5.0 (Linux; Android 12; Pixel 6 Build/SD1A.210817.036; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/94.0.4606.71 Mobile Safari/537.36 Telegram-Android/9.0.0"
}

const PREVIEWS = [
  "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
  "Twitterbot/1.0",
  "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
  "WhatsApp/2.23.20.0 A",
  "TelegramBot (like TwitterBot)",
  "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
  "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
  "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com"
]

describe("bot and link-preview detection", () => {
  it("counts every known link-preview fetcher as a bot, by our own list and by the result", () => {
    for (const ua of PREVIEWS) {
      expect(isPreviewFetcher(ua), ua).toBe(true)
      expect(parseUserAgent(ua).bot, ua).toBe(true)
    }
  })

  it("counts crawlers and scripts the bot library knows as bots", () => {
    for (const ua of [
      "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
      "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
      "curl/8.5.0",
      "python-requests/2.31.0"
    ]) {
      expect(parseUserAgent(ua).bot, ua).toBe(true)
    }
  })

  it("counts an empty user agent as a bot: every browser sends one", () => {
    expect(parseUserAgent("")).toEqual({ device: "other", browser: "other", bot: true })
    expect(parseUserAgent("   ").bot).toBe(true)
  })

  it("does not count people as bots, in-app browsers of chat and social apps included", () => {
    for (const ua of Object.values(UA)) {
      expect(parseUserAgent(ua).bot, ua).toBe(false)
      expect(isPreviewFetcher(ua), ua).toBe(false)
    }
  })
})

describe("device class and browser family", () => {
  it("names the browser family and device class of common browsers", () => {
    expect(parseUserAgent(UA.chromeWindows)).toEqual({ device: "desktop", browser: "Chrome", bot: false })
    expect(parseUserAgent(UA.safariIphone)).toEqual({ device: "mobile", browser: "Safari", bot: false })
    expect(parseUserAgent(UA.safariIpad)).toEqual({ device: "tablet", browser: "Safari", bot: false })
    expect(parseUserAgent(UA.firefoxLinux)).toEqual({ device: "desktop", browser: "Firefox", bot: false })
    expect(parseUserAgent(UA.edge)).toEqual({ device: "desktop", browser: "Microsoft Edge", bot: false })
    expect(parseUserAgent(UA.chromeAndroid)).toEqual({ device: "mobile", browser: "Chrome", bot: false })
  })

  it("puts devices that are neither desktop, mobile nor tablet, and unknown browsers, under other", () => {
    expect(parseUserAgent(UA.samsungTv).device).toBe("other")
    expect(parseUserAgent("TelegramBot (like TwitterBot)").browser).toBe("other")
    expect(parseUserAgent("\u0001\u0002 garbage").browser).toBe("other")
  })

  it("caches per user-agent string within a bound, with the same answers as parsing", () => {
    const parse = cachedUserAgentParser(2)
    const first = parse(UA.chromeWindows)
    expect(parse(UA.chromeWindows)).toBe(first)
    parse(UA.safariIphone)
    parse(UA.firefoxLinux)
    // The oldest entry went: parsed again, so a new (equal) object.
    const again = parse(UA.chromeWindows)
    expect(again).not.toBe(first)
    expect(again).toEqual(first)
  })
})

describe("referrer host", () => {
  it("keeps only the host name, lower-cased, without a trailing dot", () => {
    expect(referrerHost("https://News.Example.COM./path?q=secret#x")).toBe("news.example.com")
    expect(referrerHost("http://user:pw@host.example:8080/a")).toBe("host.example")
    expect(referrerHost("android-app://com.google.android.gm/")).toBe("com.google.android.gm")
  })

  it("is null for a direct visit or a Referer that is not a URL", () => {
    expect(referrerHost("")).toBeNull()
    expect(referrerHost("not a url")).toBeNull()
    expect(referrerHost("/relative/path")).toBeNull()
    expect(referrerHost("about:blank")).toBeNull()
  })
})

describe("country header", () => {
  it("accepts exactly two letters and upper-cases them", () => {
    expect(countryOf("de")).toBe("DE")
    expect(countryOf("US")).toBe("US")
    expect(countryOf(" fr ")).toBe("FR")
  })

  it("is null for anything else: absent, Tor (T1), unknown (XX), longer, or garbage", () => {
    for (const bad of ["", "T1", "XX", "xx", "USA", "D", "1A", "d\u00e9", "DE,FR", "<script>"]) {
      expect(countryOf(bad), bad).toBeNull()
    }
  })
})

describe("visitor hash", () => {
  const secretA = Buffer.alloc(32, 1)
  const secretB = Buffer.alloc(32, 2)

  it("is 16 hex digits, stable for one visitor under one day's secret", () => {
    const h = visitorHash(secretA, "203.0.113.7", UA.chromeWindows)
    expect(h).toMatch(/^[0-9a-f]{16}$/)
    expect(visitorHash(secretA, "203.0.113.7", UA.chromeWindows)).toBe(h)
  })

  it("differs across days' secrets, addresses and user agents", () => {
    const h = visitorHash(secretA, "203.0.113.7", UA.chromeWindows)
    expect(visitorHash(secretB, "203.0.113.7", UA.chromeWindows)).not.toBe(h)
    expect(visitorHash(secretA, "203.0.113.8", UA.chromeWindows)).not.toBe(h)
    expect(visitorHash(secretA, "203.0.113.7", UA.firefoxLinux)).not.toBe(h)
  })

  it("contains neither the address nor the user agent, and treats IPv4-mapped IPv6 as IPv4", () => {
    const h = visitorHash(secretA, "::ffff:203.0.113.7", UA.chromeWindows)
    expect(h).toBe(visitorHash(secretA, "203.0.113.7", UA.chromeWindows))
    expect(normalizeIp("0000:0000:0000:0000:0000:ffff:203.0.113.7")).toBe("203.0.113.7")
    expect(normalizeIp("2001:DB8::1")).toBe("2001:db8::1")
  })

  it("formats the socket address of uWebSockets.js the way node:http does, so both engines hash alike", () => {
    expect(ipText(new Uint8Array([203, 0, 113, 7]))).toBe("203.0.113.7")
    expect(ipText(new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 203, 0, 113, 7]))).toBe("203.0.113.7")
    const v6 = new Uint8Array(16)
    v6.set([0x20, 0x01, 0x0d, 0xb8], 0)
    v6[15] = 1
    expect(ipText(v6)).toBe("2001:db8::1")
    expect(ipText(new Uint8Array(16).fill(0).map((_, i) => (i === 15 ? 1 : 0)))).toBe("::1")
    // RFC 5952: the longest run of zero groups is the one shortened, a single zero group is not.
    const two = new Uint8Array([0x20, 0x01, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])
    expect(ipText(two)).toBe("2001:0:1::1")
    const single = new Uint8Array([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1])
    expect(ipText(single)).toBe("2001:db8:0:1:1:1:1:1")
  })

  it("takes the day from UTC: the secret changes at 00:00 UTC", () => {
    const before = Date.parse("2024-03-10T23:59:59.999Z")
    const after = Date.parse("2024-03-11T00:00:00.000Z")
    expect(utcDay(after)).toBe(utcDay(before) + 1)
    expect(dayString(utcDay(before))).toBe("2024-03-10")
    expect(dayString(utcDay(after))).toBe("2024-03-11")
  })
})
