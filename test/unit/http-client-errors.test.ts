import { describe, expect, it } from "vitest"
import { makeAllowedMethods } from "../../apps/api/middleware/Methods.js"
import { clientErrorAnswer } from "../../infra/http/ClientErrors.js"

const allowed = makeAllowedMethods([
  { method: "GET", template: "/v1/links" },
  { method: "POST", template: "/v1/links" },
  { method: "GET", template: "/v1/links/:id" },
  { method: "PATCH", template: "/v1/links/:id" },
  { method: "DELETE", template: "/v1/links/:id" }
])

const errorOf = (code: string, raw?: string) =>
  Object.assign(new Error(code), { code, ...(raw === undefined ? {} : { rawPacket: Buffer.from(raw) }) })

describe("the methods of a path (405 Allow)", () => {
  it("lists the methods of the templates a path matches, GET with HEAD, in a fixed order", () => {
    expect(allowed("/v1/links")).toEqual(["GET", "HEAD", "POST"])
    expect(allowed("/v1/links/link_1")).toEqual(["GET", "HEAD", "PATCH", "DELETE"])
    expect(allowed("/v1/openapi.json")).toEqual(["GET", "HEAD"])
  })

  it("an unknown path, a longer one or one with an empty segment takes nothing (404)", () => {
    expect(allowed("/v1/nope")).toEqual([])
    expect(allowed("/v1/links/a/b")).toEqual([])
    expect(allowed("/v1/links/")).toEqual([])
    expect(allowed("/v1/links.json")).toEqual([])
  })
})

describe("requests refused before a handler runs", () => {
  it("late headers or body: 408 request_timeout", () => {
    expect(clientErrorAnswer(errorOf("ERR_HTTP_REQUEST_TIMEOUT"), allowed)).toMatchObject({
      status: 408,
      code: "request_timeout"
    })
  })

  it("an over-long request line or header block: 431 headers_too_large", () => {
    expect(clientErrorAnswer(errorOf("HPE_HEADER_OVERFLOW"), allowed)).toMatchObject({
      status: 431,
      code: "headers_too_large"
    })
  })

  it("a method HTTP does not know: 405 with Allow on a known path, 404 elsewhere or unreadable", () => {
    expect(clientErrorAnswer(errorOf("HPE_INVALID_METHOD", "FOO /v1/links?x=1 HTTP/1.1\r\n"), allowed)).toEqual({
      status: 405,
      reason: "Method Not Allowed",
      code: "method_not_allowed",
      message: expect.any(String),
      allow: "GET, HEAD, POST"
    })
    expect(clientErrorAnswer(errorOf("HPE_INVALID_METHOD", "FOO /v1/nope HTTP/1.1\r\n"), allowed).status).toBe(404)
    expect(clientErrorAnswer(errorOf("HPE_INVALID_METHOD"), allowed).status).toBe(404)
  })

  it("anything else that is not HTTP: 400 invalid_request", () => {
    expect(clientErrorAnswer(errorOf("HPE_INVALID_CONSTANT"), allowed)).toMatchObject({
      status: 400,
      code: "invalid_request"
    })
  })
})
