import { describe, expect, it } from "vitest"
import { StatusWithHeaders } from "../../infra/http/Exchange.js"

describe("a status with fixed headers", () => {
  it("takes header names that are tokens and values of visible ASCII and spaces", () => {
    const status = new StatusWithHeaders(302, [["Cache-Control", "private, no-store"]])
    expect(status.code).toBe(302)
    expect(status.headers).toEqual([["Cache-Control", "private, no-store"]])
  })
  it("refuses what would end the header line or start another (the engine writes them into the status line)", () => {
    expect(() => new StatusWithHeaders(302, [["Cache-Control", "private\r\nSet-Cookie: a=b"]])).toThrow(/not a header/)
    expect(() => new StatusWithHeaders(302, [["Cache Control", "private"]])).toThrow(/not a header/)
    expect(() => new StatusWithHeaders(302, [["X-A\r\nX-B", "1"]])).toThrow(/not a header/)
    expect(() => new StatusWithHeaders(302, [["X-A", "caf\u00e9"]])).toThrow(/not a header/)
  })
})
