import { afterAll, beforeAll, it } from "vitest"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"

let t: TestApi
let acct: TestAccount
beforeAll(async () => {
  t = await startTestApi()
  acct = await t.newAccount()
})
afterAll(() => t.close())

it("probe", async () => {
  const out: string[] = []
  const p = async (label: string, url: string, c: any = {}) => {
    process.stderr.write(`>> ${label}\n`)
    const r = await call(url, { key: acct.key, ...c })
    process.stderr.write(`${label}: ${r.status} ${r.headers.get("content-type")} ${r.text.slice(0, 300)}\n`)
    return r
  }
  const l = await p("create", `${t.api}/links`, { method: "POST", body: { url: "https://example.com/a" } })
  const id = l.json.data.id
  //await p("cursor big", `${t.api}/links?cursor=${Buffer.from("v1:9999999999999999999").toString("base64url")}`)
  await p("id nul", `${t.api}/links/%00`)
  await p("id pct", `${t.api}/links/%`)
  await p("id pct2", `${t.api}/links/%E0%A4%A`)
  await p("q nul", `${t.api}/links?q=%00`)
  await p("limit 0x10", `${t.api}/links?limit=0x10`)
  await p("limit 1e1", `${t.api}/links?limit=1e1`)
  await p("limit empty", `${t.api}/links?limit=`)
  await p("limit dup", `${t.api}/links?limit=1&limit=2`)
  await p("date feb30", `${t.api}/links?created_after=2024-02-30`)
  await p("date 0000", `${t.api}/links?created_after=0000-01-01`)
  let deep = '"x"'
  for (let i = 0; i < 100000; i++) deep = `[${deep}]`
  await p("deep", `${t.api}/links`, { method: "POST", rawBody: `{"url":${deep}}` })
  let deepo = '"x"'
  for (let i = 0; i < 5000; i++) deepo = `{"a":${deepo}}`
  await p("deep obj", `${t.api}/links`, { method: "POST", rawBody: `{"url":${deepo}}` })
  await p("own host dot", `${t.api}/links`, { method: "POST", body: { url: "http://sho.rt./abc" } })
  await p("own host upper", `${t.api}/links`, { method: "POST", body: { url: "HTTP://SHO.RT:80/abc" } })
  await p("array", `${t.api}/links`, { method: "POST", body: [] })
  await p("null", `${t.api}/links`, { method: "POST", body: null })
  await p("num", `${t.api}/links`, { method: "POST", rawBody: "5" })
  await p("empty", `${t.api}/links`, { method: "POST", rawBody: "" })
  await p("no ct", `${t.api}/links`, { method: "POST" })
  await p("url num", `${t.api}/links`, { method: "POST", body: { url: 5 } })
  await p("slug num", `${t.api}/links`, { method: "POST", body: { url: "https://a.com", custom_slug: 1234 } })
  await p("javascript", `${t.api}/links`, { method: "POST", body: { url: "javascript:alert(1)" } })
  await p("http:foo", `${t.api}/links`, { method: "POST", body: { url: "http:foo" } })
  await p("http:/foo", `${t.api}/links`, { method: "POST", body: { url: "http:/foo" } })
  await p("http:///foo", `${t.api}/links`, { method: "POST", body: { url: "http:///foo" } })
  await p("qr", `${t.api}/links/${id}/qr?size=64&margin=16&ecc=H`)
  await p("put", `${t.api}/links`, { method: "PUT" })
  await p("head", `${t.api}/links`, { method: "HEAD" })
  await p("unknown", `${t.api}/nope`)
  await p("trailing", `${t.api}/links/`)
  await p("q param key", `${t.api}/links?api_key=abc`)
  await p("bearer empty", `${t.api}/links`, { key: "" })
  await p("unicode id", `${t.api}/links/%F0%9F%92%A9`)
  await p("lone surrogate q", `${t.api}/links?q=%ED%A0%80`)
  await p("url surrogate", `${t.api}/links`, { method: "POST", rawBody: '{"url":"https://example.com/\\ud800"}' })
  console.log(out.join("\n"))
})
