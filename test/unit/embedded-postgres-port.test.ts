import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { AppConfig, listenPorts } from "../../infra/AppConfig.js"
import { freePortOutside } from "../../infra/EmbeddedPostgres.js"

// The embedded PostgreSQL's port: never one the service is configured to listen on. (A CI run
// saw the kernel hand the database a test's MEDIA_PORT, and the service's start fail on it.)

const offering = (ports: Array<number>) => {
  const asked: Array<number> = []
  const pick = async () => {
    const port = ports.shift()
    if (port === undefined) throw new Error("no more ports")
    asked.push(port)
    return port
  }
  return { pick, asked }
}

describe("the embedded PostgreSQL's port", () => {
  it("asks again while the port offered is one of the service's own", async () => {
    const { pick, asked } = offering([8082, 8080, 45425, 50000])
    expect(await freePortOutside([8080, 8082, 45425], pick)).toBe(50000)
    expect(asked).toEqual([8082, 8080, 45425, 50000])
  })

  it("takes the first port offered when it is not reserved", async () => {
    const { pick, asked } = offering([50001, 8082])
    expect(await freePortOutside([8082], pick)).toBe(50001)
    expect(asked).toEqual([50001])
  })

  it("gives up with an error naming the reserved ports when only they are offered", async () => {
    await expect(freePortOutside([8082], async () => 8082)).rejects.toThrow(
      "every free port offered was one of the service's own (8082)"
    )
  })

  it.effect("reserves every port the service is configured to listen on", () =>
    Effect.gen(function* () {
      const config = yield* AppConfig
      expect([...listenPorts(config)].sort()).toEqual([41001, 41002, 41003, 41004, 41005])
    }).pipe(
      Effect.provide(
        AppConfig.make({ apiPort: 41001, shortPort: 41002, mediaPort: 41003, snapshotPort: 41004, workersPort: 41005 })
      )
    )
  )
})
