import { createHmac } from "node:crypto"
import Bowser from "bowser"
import { isbot } from "isbot"
import { BoundedCache } from "../../infra/BoundedCache.js"

export type Device = "desktop" | "mobile" | "tablet" | "other"

export interface UserAgentClass {
  readonly device: Device
  /** Browser family as bowser names it (Chrome, Safari, Firefox, …), or "other". */
  readonly browser: string
  /** A crawler, a script, or a link-preview fetcher: counted apart. */
  readonly bot: boolean
}

/**
 * Link-preview fetchers of chat and social apps: they fetch every link pasted into a
 * conversation, which is not a visit. isbot knows most of them today; this list keeps them
 * counted apart whatever its next release does. Each name is the fetcher's own token, never
 * the app's in-app browser (FBAN, LinkedInApp, Telegram-Android, Slack/… are people).
 */
const PREVIEW_FETCHERS =
  /Slackbot|Slack-ImgProxy|Twitterbot|facebookexternalhit|facebookcatalog|Facebot|WhatsApp\/|TelegramBot|Discordbot|LinkedInBot|Applebot|SkypeUriPreview|redditbot|Pinterestbot|Embedly|Iframely|vkShare|Snap URL Preview|Mastodon\/|Cardyb|Google-PageRenderer|Zoombot|KakaoTalk-Scrap/i

export const isPreviewFetcher = (userAgent: string): boolean => PREVIEW_FETCHERS.test(userAgent)

const DEVICES: Record<string, Device> = { desktop: "desktop", mobile: "mobile", tablet: "tablet" }

/**
 * Parses a user agent. An empty one is a bot: every browser sends one, scripts often don't.
 * Bowser throws on the empty string, and on odd input it may too: that is "other".
 */
export const parseUserAgent = (userAgent: string): UserAgentClass => {
  const ua = userAgent.trim()
  if (ua === "") return { device: "other", browser: "other", bot: true }
  const bot = isbot(ua) || isPreviewFetcher(ua)
  try {
    const parsed = Bowser.parse(ua)
    const name = parsed.browser.name?.trim() ?? ""
    return {
      device: DEVICES[parsed.platform.type ?? ""] ?? "other",
      browser: name === "" || name.length > 64 ? "other" : name,
      bot
    }
  } catch {
    return { device: "other", browser: "other", bot }
  }
}

/** parseUserAgent behind a bounded cache: user agents repeat a lot, so parsing is rare. */
export const cachedUserAgentParser = (maxEntries = 10_000) => {
  const cache = new BoundedCache<string, UserAgentClass>({ maxWeight: maxEntries })
  return (userAgent: string): UserAgentClass => cache.getOrCompute(userAgent, parseUserAgent)
}

/** Host name of a Referer, lower case, without a trailing dot; null for none or garbage. */
export const referrerHost = (referer: string): string | null => {
  if (referer === "" || !URL.canParse(referer)) return null
  const host = new URL(referer).hostname.toLowerCase().replace(/\.+$/, "")
  return host === "" || host.length > 253 ? null : host
}

/** referrerHost behind a bounded cache: a page that links to a short link sends many clicks. */
export const cachedReferrerHost = (maxEntries = 10_000) => {
  const cache = new BoundedCache<string, string | null>({ maxWeight: maxEntries })
  return (referer: string): string | null => (referer === "" ? null : cache.getOrCompute(referer, referrerHost))
}

/**
 * The country from the trusted proxy's header: two ASCII letters, upper-cased; anything else
 * (absent, "T1" for Tor, "XX" for unknown, garbage) is null. With no header configured the
 * value is never read from the request at all.
 */
export const countryOf = (value: string): string | null => {
  if (value.length < 2 || !/^\s*[A-Za-z]{2}\s*$/.test(value)) return null
  const code = value.trim().toUpperCase()
  return code === "XX" ? null : code
}

/** IPv4 clients may show up as IPv4-mapped IPv6 (::ffff:a.b.c.d): one visitor, one form. */
export const normalizeIp = (ip: string): string => {
  const lower = ip.toLowerCase()
  if (lower.startsWith("::ffff:") && lower.includes(".")) return lower.slice(7)
  if (lower.startsWith("0000:0000:0000:0000:0000:ffff:") && lower.includes(".")) return lower.slice(30)
  return lower
}

/**
 * 16 hex digits of HMAC-SHA256 under the day's secret: the same visitor (address and user
 * agent) gives the same value all day, and nothing links it to another day or to the person
 * once the secret is gone.
 */
export const visitorHash = (secret: Uint8Array, ip: string, userAgent: string): string =>
  createHmac("sha256", secret).update(normalizeIp(ip)).update("\n").update(userAgent).digest("hex").slice(0, 16)

export const DAY_MS = 86_400_000

/** Days since the epoch in UTC: the secret changes at 00:00 UTC. */
export const utcDay = (ms: number): number => Math.floor(ms / DAY_MS)

/** YYYY-MM-DD of a utcDay. */
export const dayString = (day: number): string => new Date(day * DAY_MS).toISOString().slice(0, 10)
