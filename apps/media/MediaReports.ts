import { createHmac, randomBytes } from "node:crypto"
import type { HttpAnswer, HttpExchange } from "../../infra/http/HttpServer.js"
import { NO_TRUSTED_PROXIES, visitorAddressText } from "../../infra/http/TrustedProxies.js"
import { makeRateLimiter, retryAfterSeconds } from "../../infra/RateLimiter.js"
import { HTML, html, type Later, TEXT } from "./MediaAnswers.js"
import type { MediaDeps } from "./MediaConfig.js"
import { messagePage, PAGE_CSP, REASON_MAX_CHARS, sharePage } from "./SharePage.js"

/** Largest report body read (the form has one field of at most 1000 characters). */
export const REPORT_BODY_MAX_BYTES = 8 * 1024
/** Reports one image may receive per minute, from everyone together. */
export const REPORTS_PER_IMAGE_PER_MINUTE = 20

/** A form body's `reason`: trimmed, control characters but tab and line breaks removed. */
const parseReason = (body: Uint8Array): string | undefined => {
  let text: string
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body)
  } catch {
    return undefined
  }
  const reason = new URLSearchParams(text).get("reason")
  if (reason === null) return undefined
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
  const clean = reason.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, "").trim()
  return clean === "" || [...clean].length > REASON_MAX_CHARS ? undefined : clean
}

/** `/v/{id}` (the share page) and `/v/{id}/report` (abuse reports, rate limited). */
export const makeSharePages = (deps: MediaDeps, later: Later) => {
  // Reports per client address and per image: a minute's allowance at once, refilled evenly.
  const limiter = makeRateLimiter({ maxKeys: 100_000 })
  const perClient = { perSecond: deps.reportsPerMinute / 60, burst: deps.reportsPerMinute }
  const perImage = { perSecond: REPORTS_PER_IMAGE_PER_MINUTE / 60, burst: REPORTS_PER_IMAGE_PER_MINUTE }
  // Client addresses only ever appear keyed with a secret of this process: never stored.
  const clientSecret = randomBytes(32)
  const trustedProxies = deps.trustedProxies ?? NO_TRUSTED_PROXIES

  const share = (ex: HttpExchange, id: string) => {
    const reported = /(^|&)reported=1(&|$)/.test(ex.query())
    const answer = ex.defer()
    later(answer, async () => {
      const image = await deps.lookup(id)
      if (image === undefined || image.deleted || image.status === "failed" || image.ext === null) {
        return html(answer, 404, messagePage("Image not found", "This image does not exist or was removed."))
      }
      html(
        answer,
        200,
        sharePage({
          id,
          imagePath: `${deps.basePath}/${id}.${image.ext}`,
          reportPath: `${deps.basePath}/v/${id}/report`,
          rating: image.status === "ready" ? image.rating : undefined,
          reported
        })
      )
    })
  }

  const tooMany = (a: HttpAnswer, retryAfter: number) =>
    a
      .writeStatus(429)
      .writeHeader("Retry-After", String(retryAfter))
      .writeHeader("Content-Type", HTML)
      .writeHeader("Cache-Control", "no-store")
      .writeHeader("Content-Security-Policy", PAGE_CSP)
      .end(messagePage("Too many reports", `Please wait ${retryAfter} seconds before reporting again.`))

  const report = (ex: HttpExchange, id: string) => {
    const client = createHmac("sha256", clientSecret).update(visitorAddressText(trustedProxies, ex)).digest("base64url")
    const wait = limiter.take(`client ${client}`, perClient)
    const isForm = /^application\/x-www-form-urlencoded\s*(;|$)/.test(ex.header("content-type").toLowerCase())
    // The body is read (up to the cap) before any answer, so the connection stays usable.
    const { answer, body } = ex.readBody(REPORT_BODY_MAX_BYTES)
    later(answer, async () => {
      const bytes = await body
      if (answer.aborted) return
      if (wait > 0) return tooMany(answer, retryAfterSeconds(wait))
      if (!isForm) {
        return html(
          answer,
          415,
          messagePage("Unsupported form", "Send the report form as application/x-www-form-urlencoded."),
          ["Accept-Post", "application/x-www-form-urlencoded"]
        )
      }
      if (bytes === undefined) {
        return html(
          answer,
          413,
          messagePage("Report too large", `A reason has at most ${REASON_MAX_CHARS} characters.`)
        )
      }
      const reason = parseReason(bytes)
      if (reason === undefined) {
        return html(
          answer,
          400,
          messagePage("Reason missing", `Say what is wrong with the image, in 1 to ${REASON_MAX_CHARS} characters.`)
        )
      }
      const image = await deps.lookup(id)
      if (image === undefined || image.deleted || image.status === "failed") {
        return html(answer, 404, messagePage("Image not found", "This image does not exist or was removed."))
      }
      const imageWait = limiter.take(`image ${id}`, perImage)
      if (imageWait > 0) return tooMany(answer, retryAfterSeconds(imageWait))
      await deps.report(id, reason)
      answer
        .writeStatus(303)
        .writeHeader("Location", `${deps.basePath}/v/${id}?reported=1`)
        .writeHeader("Cache-Control", "no-store")
        .writeHeader("Content-Type", TEXT)
        .end("Thank you, your report was filed.\n")
    })
  }

  return { share, report }
}
