import { describe, expect, it } from "vitest"
import { listenFailed } from "../../infra/StartupError.js"

const errno = (code: string) => Object.assign(new Error(code), { code })

describe("a listener that cannot bind is named by its variable", () => {
  it("a port in use (node's EADDRINUSE, wrapped or not, or uWebSockets.js's reasonless failure)", () => {
    const expected = "API_PORT=8080 is in use; stop what listens there or set API_PORT"
    expect(listenFailed("API_PORT", 8080)(errno("EADDRINUSE")).message).toBe(expected)
    expect(listenFailed("API_PORT", 8080)({ _tag: "ServeError", cause: errno("EADDRINUSE") }).message).toBe(expected)
    expect(listenFailed("SHORT_PORT", 80)(new Error("could not listen")).message).toBe(
      "SHORT_PORT=80 is in use; stop what listens there or set SHORT_PORT"
    )
  })

  it("a privileged port", () => {
    expect(listenFailed("MEDIA_PORT", 80)(errno("EACCES")).message).toBe(
      "MEDIA_PORT=80 is not permitted (ports below 1024 need privileges)"
    )
  })
})
