import { type DefaultTreeAdapterMap, parse, serialize } from "parse5"
import { absoluteRef, EMPTY_URL, processCss, type Rewritable, replacement } from "./Css.js"
import { parseSrcset, serializeSrcset } from "./Srcset.js"

type Node = DefaultTreeAdapterMap["node"]
type Element = DefaultTreeAdapterMap["element"]
type ParentNode = DefaultTreeAdapterMap["parentNode"]

/** Never kept: scripts, frames, plugins and media streams are neither fetched nor served. */
const DROPPED = new Set([
  "script",
  "iframe",
  "frame",
  "frameset",
  "object",
  "embed",
  "applet",
  "video",
  "audio",
  "track",
  "portal",
  "base",
  "fencedframe"
])
/** Attributes that carry a URL the browser loads by itself, per element. */
const IMAGE_ATTRS: Readonly<Record<string, ReadonlyArray<string>>> = {
  img: ["src", "lowsrc"],
  input: ["src"],
  body: ["background"],
  table: ["background"],
  td: ["background"],
  th: ["background"],
  image: ["href", "xlink:href"]
}
const LINK_KEPT = /(^|\s)(stylesheet|icon|apple-touch-icon|apple-touch-icon-precomposed|mask-icon)(\s|$)/i
/** Attributes removed everywhere: they fetch, navigate, or would break rewritten bytes (integrity). */
const STRIPPED_ATTRS = new Set(["ping", "integrity", "nonce", "crossorigin", "action", "formaction", "manifest"])

export interface ParsedPage extends Rewritable {
  readonly title: string | null
  /** Adds the capture notice (time and original URL) at the top of the body; call before render. */
  readonly addNotice: (capturedAt: string, originalUrl: string) => void
}

const NOTICE_STYLE =
  "all:initial;display:block;font:13px/1.4 sans-serif;background:#fffbe6;color:#333;border-bottom:1px solid #e0d890;padding:6px 10px"

/** The notice element: plain text nodes, so nothing in the URL can become markup. */
const noticeElement = (capturedAt: string, originalUrl: string): Element => {
  const el = {
    nodeName: "div",
    tagName: "div",
    attrs: [
      { name: "id", value: "snapshot-notice" },
      { name: "style", value: NOTICE_STYLE }
    ],
    namespaceURI: "http://www.w3.org/1999/xhtml",
    childNodes: [] as Array<DefaultTreeAdapterMap["childNode"]>,
    parentNode: null
  } as unknown as Element
  el.childNodes.push({
    nodeName: "#text",
    value: `Snapshot captured ${capturedAt} from ${originalUrl}. Scripts are disabled and links do not navigate.`,
    parentNode: el
  } as unknown as DefaultTreeAdapterMap["childNode"])
  return el
}

const isElement = (n: Node): n is Element => "tagName" in n
const attr = (el: Element, name: string) => el.attrs.find((a) => a.name === name)
const textOf = (el: Element) =>
  el.childNodes.map((c) => ("value" in c && c.nodeName === "#text" ? c.value : "")).join("")

/**
 * An HTML page parsed with parse5 (scripting off, so `<noscript>` content is markup and gets
 * rewritten too). References: stylesheets and icons of `<link>`, images (`src`, `srcset`
 * of `<img>` and `<picture><source>`, `background`, SVG `<image>`), `url()` and `@import`
 * in `<style>` and `style` attributes. Dropped: scripts, frames, plugins, media, `<base>`,
 * other `<link>`s, `<meta http-equiv>`, event handler attributes and `javascript:` URLs;
 * navigation links keep their target in `data-original-href` only.
 */
export const processHtml = (html: string, pageUrl: string): ParsedPage => {
  const document = parse(html, { scriptingEnabled: false })
  const refs = new Set<string>()
  const add = (value: string, base = pageUrl) => {
    const absolute = absoluteRef(value, base)
    if (absolute !== undefined) refs.add(absolute)
  }
  const renders: Array<(map: (absolute: string) => string | undefined) => void> = []
  let title: string | null = null

  const urlAttr = (el: Element, name: string) => {
    const a = attr(el, name)
    if (a === undefined) return
    add(a.value)
    renders.push((map) => {
      a.value = replacement(a.value, pageUrl, map)
    })
  }
  const srcsetAttr = (el: Element) => {
    const a = attr(el, "srcset")
    if (a === undefined) return
    const candidates = parseSrcset(a.value)
    for (const c of candidates) add(c.url)
    renders.push((map) => {
      a.value = serializeSrcset(candidates.map((c) => ({ ...c, url: replacement(c.url, pageUrl, map) })))
    })
  }

  const visitElement = (el: Element, parent: ParentNode): boolean => {
    const tag = el.tagName
    if (DROPPED.has(tag)) return false
    if (tag === "meta" && attr(el, "http-equiv") !== undefined) return false
    if (tag === "link" && !LINK_KEPT.test(attr(el, "rel")?.value ?? "")) return false
    el.attrs = el.attrs.filter(
      (a) => !a.name.startsWith("on") && !STRIPPED_ATTRS.has(a.name) && !/^\s*javascript:/i.test(a.value)
    )
    if (tag === "title" && title === null) title = textOf(el).trim().slice(0, 1000) || null
    if (tag === "meta" && attr(el, "charset") !== undefined) attr(el, "charset")!.value = "utf-8"
    if (tag === "link") urlAttr(el, "href")
    for (const name of IMAGE_ATTRS[tag] ?? []) urlAttr(el, name)
    if (tag === "img" || (tag === "source" && isElement(parent as Node) && (parent as Element).tagName === "picture")) {
      srcsetAttr(el)
      if (tag === "source") urlAttr(el, "src")
    }
    if (tag === "a" || tag === "area") {
      const href = attr(el, "href")
      if (href !== undefined && !href.value.startsWith("#")) {
        const target = absoluteRef(href.value, pageUrl)
        el.attrs = el.attrs.filter((a) => a.name !== "href")
        if (target !== undefined) el.attrs.push({ name: "data-original-href", value: target })
      }
    }
    if (tag === "use") el.attrs = el.attrs.filter((a) => !/href$/.test(a.name) || a.value.startsWith("#"))
    const style = attr(el, "style")
    if (style !== undefined) {
      const css = processCss(style.value, pageUrl, "declarationList")
      for (const r of css.refs) refs.add(r)
      renders.push((map) => {
        style.value = css.render(map)
      })
    }
    if (tag === "style") {
      const css = processCss(textOf(el), pageUrl, "stylesheet")
      for (const r of css.refs) refs.add(r)
      renders.push((map) => {
        const text = css.render(map)
        el.childNodes = [{ nodeName: "#text", value: text, parentNode: el } as Node as Element]
      })
    }
    return true
  }

  const walk = (parent: ParentNode) => {
    parent.childNodes = parent.childNodes.filter((child) => {
      if (!isElement(child)) return true
      if (!visitElement(child, parent)) return false
      walk(child)
      if (child.tagName === "template") walk((child as DefaultTreeAdapterMap["template"]).content)
      return true
    })
  }
  walk(document)

  const addNotice = (capturedAt: string, originalUrl: string) => {
    const html = document.childNodes.find((n): n is Element => isElement(n) && n.tagName === "html")
    const body = html?.childNodes.find((n): n is Element => isElement(n) && n.tagName === "body")
    if (body === undefined) return
    const notice = noticeElement(capturedAt, originalUrl)
    ;(notice as { parentNode: unknown }).parentNode = body
    body.childNodes.unshift(notice)
  }

  return {
    refs: [...refs],
    title,
    addNotice,
    render: (map) => {
      for (const render of renders) render(map)
      return serialize(document)
    }
  }
}

export { EMPTY_URL }
