import { createRequire } from "node:module"
import * as path from "node:path"

/**
 * The API reference page at `{base_url}/docs`: Scalar's API reference, the bundle
 * @effect/platform ships for `HttpApiScalar` (read from node_modules, never a CDN), over the
 * same OpenAPI document as `{base_url}/openapi.json`. It works with no internet: the default
 * fonts are off, there is no proxy, no "try it" request button and no client code generator,
 * so no API key is ever typed into the page; the Content-Security-Policy below holds the
 * browser to the page's own host.
 */

const require = createRequire(import.meta.url)

/** Scalar's standalone bundle, as @effect/platform inlines it (HttpApiScalar's default `source`). */
export const scalarBundle = (): string => {
  // The bundle is an internal module of @effect/platform (not in its exports map): read by path.
  const entry = require.resolve("@effect/platform/HttpApiScalar")
  const internal: { readonly javascript: string } = require(path.join(path.dirname(entry), "internal/httpApiScalar.js"))
  return internal.javascript
}

/** Scalar's configuration: offline and read-only. */
const SCALAR_CONFIG = {
  _integration: "html",
  withDefaultFonts: false,
  hideTestRequestButton: true,
  hideClientButton: true,
  // No code samples: they come with a form for a key.
  hiddenClients: true,
  // The authentication card asks for a key to fill the samples in: the page shows none.
  customCss: ".scalar-reference-intro-auth { display: none !important; }",
  hideDarkModeToggle: false,
  showDeveloperTools: "never",
  telemetry: false,
  mcp: { disabled: true },
  agent: { disabled: true },
  documentDownloadType: "json",
  defaultOpenAllTags: true
}

/** Keeps every request of the page on its own host (and inline styles, which Scalar sets). */
export const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'"
].join("; ")

/** JSON for a `<script>` element: nothing in it can close the element. */
const scriptJson = (value: unknown) =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029")

const escapeHtml = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

/** The page: the document inlined, the bundle loaded from `scriptUrl` (on the same host). */
export const docsPageHtml = (document: { readonly info?: { readonly title?: string } }, scriptUrl: string): string =>
  `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${escapeHtml(document.info?.title ?? "API reference")}</title>
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <style>body { font-family: system-ui, sans-serif; } code, pre { font-family: ui-monospace, monospace; }</style>
  </head>
  <body>
    <script id="api-reference" type="application/json">${scriptJson(document)}</script>
    <script>document.getElementById("api-reference").dataset.configuration = JSON.stringify(${scriptJson(SCALAR_CONFIG)})</script>
    <script src="${escapeHtml(scriptUrl)}"></script>
  </body>
</html>
`
