import { createHash } from "node:crypto"
import type { Rating } from "../../domain/Image.js"

/** Longest abuse report reason, in characters. */
export const REASON_MAX_CHARS = 1000

const STYLE = `
body{font:16px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;color:#222}
img{max-width:100%;height:auto;display:block;margin:1rem 0;background:#eee}
.rating{padding:.5rem .75rem;border-radius:.25rem;background:#f3f3f3}
.rating.nsfw,.rating.unrated{background:#fde8e8}
.rating.sensitive{background:#fff4e0}
summary{cursor:pointer;font-weight:600}
.notice{padding:.5rem .75rem;background:#e6f4ea;border-radius:.25rem}
textarea{width:100%;box-sizing:border-box}
`

/**
 * The pages need no script, no frame, no plugin and no third party: only our own images, one
 * inline style block (pinned by its hash) and forms that post back to this host.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "img-src 'self'",
  `style-src 'sha256-${createHash("sha256").update(STYLE).digest("base64")}'`,
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'"
].join("; ")

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">` +
  `<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head>` +
  `<body>${body}</body></html>\n`

/** The rating in words, as the share page shows it. */
export const ratingContext = (rating: Rating): string => {
  switch (rating) {
    case "general":
      return "Rated general: suitable for all audiences."
    case "sensitive":
      return "Rated sensitive: may contain suggestive or disturbing content."
    case "nsfw":
      return "Rated nsfw: may contain explicit content."
    case "unrated":
      return "Not yet rated: treat with caution."
  }
}

export interface SharePageInput {
  readonly id: string
  /** Path of the delivery URL on this host (root-relative, with any prefix of PUBLIC_IMAGE_HOST). */
  readonly imagePath: string
  /** Path the report form posts to. */
  readonly reportPath: string
  /** undefined while processing. */
  readonly rating: Rating | undefined
  readonly reported: boolean
}

/**
 * The share page: the image, its rating in words, and the report form. An image rated
 * anything but general sits behind a click (a closed <details>, no script) and loads only
 * when opened.
 */
export const sharePage = (p: SharePageInput): string => {
  const img = `<img src="${escapeHtml(p.imagePath)}" alt="Shared image ${escapeHtml(p.id)}" loading="lazy">`
  const shown =
    p.rating === undefined
      ? `<p class="rating">Processing: this image is not ready yet. Reload in a moment.</p>${img}`
      : p.rating === "general"
        ? `<p class="rating general">${ratingContext(p.rating)}</p>${img}`
        : `<p class="rating ${p.rating}">${ratingContext(p.rating)}</p>` +
          `<details><summary>Show the image</summary>${img}</details>`
  const notice = p.reported
    ? `<p class="notice" role="status">Thank you. Your report was filed and will be reviewed by an operator.</p>`
    : ""
  const form =
    `<h2>Report this image</h2>` +
    `<form method="post" action="${escapeHtml(p.reportPath)}" enctype="application/x-www-form-urlencoded">` +
    `<label for="reason">What is wrong with it? (at most ${REASON_MAX_CHARS} characters)</label>` +
    `<textarea id="reason" name="reason" rows="4" maxlength="${REASON_MAX_CHARS}" required></textarea>` +
    `<button type="submit">Report</button></form>`
  return page(`Image ${p.id}`, `<h1>Shared image</h1>${notice}${shown}${form}`)
}

/** A short page for everything else a browser may see here (404, 400, 429…). */
export const messagePage = (title: string, text: string): string =>
  page(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p>`)
