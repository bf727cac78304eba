import {
  ConfigProvider,
  Context,
  Effect,
  Exit,
  Layer,
  Logger,
  LogLevel,
  ManagedRuntime,
  Option,
  Redacted,
  Schema,
  Scope
} from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { dayString, utcDay, visitorHash } from "../../apps/redirector/ClickClassify.js"
import { makeClickCapture } from "../../apps/redirector/Clicks.js"
import { Redirector, RedirectorLayer } from "../../apps/redirector/Redirector.js"
import { EventLog, EventLogError, type OutgoingRecord } from "../../domain/EventLog.js"
import { batchedClicks, ClickEvent, linkedClicks } from "../../domain/Events.js"
import { AppConfig } from "../../infra/AppConfig.js"
import { LinkRepoLive } from "../../infra/postgres/Links.js"
import { OutboxRelayLive } from "../../infra/postgres/OutboxRelay.js"
import { VisitorSecretRepoLive } from "../../infra/postgres/VisitorSecrets.js"
import { call, startTestApi, type TestAccount, type TestApi } from "../support/api.js"
import { clickOn } from "../support/clickLinks.js"
import { clicksInLog } from "../support/clicks.js"
import { embeddedEventLogLayer, kafkaEventLogLayer, testDatabaseLayer, testKafkaBrokers } from "../support/eventlog.js"
import type { Envelope, Link } from "../support/resources.js"
import { waitFor, waitForEffect } from "../support/waitFor.js"

const CHROME =
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
const SLACKBOT = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"

/** The outbox relay and an event log on the API's database: what the redirector follows. */
const infraLayer = (databaseUrl: string, brokers: ReadonlyArray<string> | undefined) =>
  OutboxRelayLive.pipe(
    Layer.provideMerge(
      brokers === undefined
        ? embeddedEventLogLayer(databaseUrl)
        : Layer.merge(kafkaEventLogLayer(brokers), testDatabaseLayer(databaseUrl))
    ),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )

interface Env {
  readonly api: TestApi
  readonly account: TestAccount
  readonly infra: ManagedRuntime.ManagedRuntime<Layer.Layer.Success<ReturnType<typeof infraLayer>>, unknown>
}

/** The real API on a fresh database, its outbox relay and the log (embedded, or Kafka on `brokers`). */
const useEnv = (brokers?: ReadonlyArray<string>) => {
  let current: Env | undefined
  beforeAll(async () => {
    const api = await startTestApi()
    const infra = ManagedRuntime.make(infraLayer(api.databaseUrl, brokers))
    await infra.runPromise(Effect.void)
    current = { api, account: await api.newAccount(), infra }
  })
  afterAll(async () => {
    await current?.infra.dispose()
    await current?.api.close()
  })
  return () => current!
}

interface Running {
  readonly base: string
  readonly info: Context.Tag.Service<Redirector>
  readonly close: () => Promise<void>
}

/** A redirector on a random port over the env's log and database, on the given engine. */
const startRedirector = (env: Env, engine: "uws" | "node"): Promise<Running> =>
  env.infra.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const config = AppConfig.make({
        databaseUrl: Option.some(Redacted.make(env.api.databaseUrl)),
        shortPort: 0,
        countryHeader: "cf-ipcountry"
      })
      const context = yield* Layer.buildWithScope(
        RedirectorLayer.pipe(
          Layer.provide(Layer.merge(LinkRepoLive, VisitorSecretRepoLive)),
          Layer.provide(config),
          Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
        ),
        scope
      ).pipe(
        Effect.withConfigProvider(
          ConfigProvider.fromMap(new Map([["HTTP_ENGINE", engine]])).pipe(
            ConfigProvider.orElse(() => ConfigProvider.fromEnv())
          )
        )
      )
      const info = Context.get(context, Redirector)
      return {
        base: `http://127.0.0.1:${info.port}`,
        info,
        close: () => env.infra.runPromise(Scope.close(scope, Exit.void))
      }
    })
  )

const createLink = async (env: Env, url: string) => {
  const r = await call<Envelope<Link>>(`${env.api.api}/links`, { method: "POST", key: env.account.key, body: { url } })
  expect(r.status, r.text).toBe(201)
  return r.json.data as { id: string; slug: string; updated_at: string }
}

const hit = async (url: string, init: { method?: string; headers?: Record<string, string> } = {}) => {
  const res = await fetch(url, { redirect: "manual", ...init })
  const body = await res.text()
  return { status: res.status, headers: res.headers, body }
}

/** Every click of a link in clicks.v1, each event once (test/support/clicks.ts). */
const clicksOf = (env: Env, linkId: string) => env.infra.runPromise(clicksInLog(linkId))

const env = useEnv()

describe.each(["uws", "node"] as const)("redirector on the %s engine", (engine) => {
  let r: Running
  /** From an API change to the short host showing it, for the report. */
  const latencies: Array<number> = []
  beforeAll(async () => {
    r = await startRedirector(env(), engine)
  })
  afterAll(async () => {
    await r?.close()
    if (latencies.length > 0) console.info(`${engine}: change-to-visible latencies (ms): ${latencies.join(", ")}`)
  })

  it("runs on the engine it was asked for, healthy and ready once the slug table is loaded", async () => {
    expect(r.info.engine).toBe(engine === "uws" ? "uWebSockets.js" : "node:http")
    expect((await hit(`${r.base}/healthz`)).status).toBe(200)
    const ready = await hit(`${r.base}/readyz`)
    expect(ready.status).toBe(200)
    expect(r.info.table.ready).toBe(true)
  })

  it("a new link answers 302 with its destination and Cache-Control: private, no-store, and an empty body", async () => {
    const link = await createLink(env(), "https://example.com/landing?x=1")
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).status).toBe(302)
      return true
    })
    const res = await hit(`${r.base}/${link.slug}?ignored=1`)
    expect(res.status).toBe(302)
    expect(res.headers.get("location")).toBe("https://example.com/landing?x=1")
    expect(res.headers.get("cache-control")).toBe("private, no-store")
    expect(res.body).toBe("")
  })

  it("UTM options are added to the destination without replacing parameters it already has", async () => {
    const link = await createLink(env(), "https://example.com/p?utm_source=own#frag")
    const patched = await call(`${env().api.api}/links/${link.id}/options`, {
      method: "PATCH",
      key: env().account.key,
      body: { utm: { utm_source: "news", utm_medium: "email" } }
    })
    expect(patched.status, patched.text).toBe(200)
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).headers.get("location")).toBe(
        "https://example.com/p?utm_source=own&utm_medium=email#frag"
      )
      return true
    })
  })

  it("a changed destination is live on the short host, well within the budget of 1 s", async () => {
    const link = await createLink(env(), "https://example.com/before")
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).status).toBe(302)
      return true
    })
    const patched = await call(`${env().api.api}/links/${link.id}`, {
      method: "PATCH",
      key: env().account.key,
      body: { url: "https://example.com/after" }
    })
    expect(patched.status, patched.text).toBe(200)
    // Polled with slack: a loaded machine must not fail this; the latency is reported.
    const started = Date.now()
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).headers.get("location")).toBe("https://example.com/after")
      return true
    })
    latencies.push(Date.now() - started)
  })

  it("a deleted (disabled) link answers the 404 page", async () => {
    const link = await createLink(env(), "https://example.com/doomed")
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).status).toBe(302)
      return true
    })
    const deleted = await call(`${env().api.api}/links/${link.id}`, { method: "DELETE", key: env().account.key })
    expect(deleted.status, deleted.text).toBe(200)
    const started = Date.now()
    await waitFor(async () => {
      const res = await hit(`${r.base}/${link.slug}`)
      expect(res.status).toBe(404)
      expect(res.headers.get("content-type")).toMatch(/^text\/html/)
      expect(res.headers.get("location")).toBeNull()
      return true
    })
    latencies.push(Date.now() - started)
  })

  it("an expired link answers 404 from its expiry on, without any new event", async () => {
    const link = await createLink(env(), "https://example.com/soon-gone")
    const expiresAt = new Date(Date.now() + 1500)
    const patched = await call(`${env().api.api}/links/${link.id}/options`, {
      method: "PATCH",
      key: env().account.key,
      body: { expires_at: expiresAt.toISOString() }
    })
    expect(patched.status, patched.text).toBe(200)
    await waitFor(async () => {
      expect(r.info.table.entryOf(`/${link.slug}`)?.expiresAt).toBe(expiresAt.getTime())
      return true
    })
    // No event comes at the expiry: wait for the clock to pass it.
    await waitFor(() => Date.now() > expiresAt.getTime() + 50, { message: "the clock to pass the expiry" })
    expect((await hit(`${r.base}/${link.slug}`)).status).toBe(404)
    expect((await hit(`${r.base}/${link.slug}`, { method: "HEAD" })).status).toBe(404)
  })

  it("an unknown slug answers 404 with a small HTML page that is not cached", async () => {
    const res = await hit(`${r.base}/NoSuchSlug42`)
    expect(res.status).toBe(404)
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(res.headers.get("cache-control")).toBe("private, no-store")
    expect(res.body).toMatch(/<title>Link not found<\/title>/)
    expect(res.body.length).toBeLessThan(1024)
  })

  it("other methods than GET and HEAD answer 405 and redirect nowhere", async () => {
    const link = await createLink(env(), "https://example.com/post")
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).status).toBe(302)
      return true
    })
    const res = await hit(`${r.base}/${link.slug}`, { method: "POST" })
    expect(res.status).toBe(405)
    expect(res.headers.get("allow")).toBe("GET, HEAD")
    expect(res.headers.get("location")).toBeNull()
  })

  it("a GET is a click: in a clicks.recorded event of its link, with the privacy fields only, no address and no user agent", async () => {
    const link = await createLink(env(), "https://example.com/clicked")
    await waitFor(async () => {
      expect(r.info.table.has(`/${link.slug}`)).toBe(true)
      return true
    })
    const before = Date.now()
    const res = await hit(`${r.base}/${link.slug}`, {
      headers: { "user-agent": CHROME, referer: "https://News.Example.org/story?id=7", "cf-ipcountry": "de" }
    })
    expect(res.status).toBe(302)
    let clicks: Awaited<ReturnType<typeof clicksOf>> = []
    await waitFor(async () => {
      clicks = await clicksOf(env(), link.id)
      expect(clicks.length).toBe(1)
      return true
    })
    const { click, event, record } = clicks[0]!
    expect(record.key).toBe(env().account.accountId)
    expect(event.type).toBe("clicks.recorded")
    expect(event.version).toBe(3)
    expect(event.account_id).toBe(env().account.accountId)
    expect(Date.parse(event.occurred_at)).toBeGreaterThanOrEqual(before - 5)
    expect(Date.parse(event.occurred_at)).toBeLessThanOrEqual(Date.now())
    // The account's other links may have clicks in the same event: this link is listed once.
    expect("links" in event.data && event.data.links.filter((id) => id === link.id)).toEqual([link.id])
    expect(click).toEqual({
      link_id: link.id,
      at: expect.any(Number),
      country: "DE",
      referrer_host: "news.example.org",
      device: "desktop",
      browser: "Chrome",
      bot: false,
      visitor: expect.stringMatching(/^[0-9a-f]{16}$/)
    })
    expect(click.at).toBeGreaterThanOrEqual(before - 5)
    expect(click.at).toBeLessThanOrEqual(Date.parse(event.occurred_at))
    // Nothing beyond the envelope and the click fields, and no trace of who clicked.
    const raw = JSON.parse(record.value)
    expect(Object.keys(raw).sort()).toEqual(["account_id", "data", "id", "occurred_at", "type", "version"])
    expect(Object.keys(raw.data).sort()).toEqual(
      ["at", "countries", "country", "link", "links", "referrer", "referrer_hosts", "visitor", "visitors"].sort()
    )
    const i = (raw.data.link as Array<number>).findIndex((l) => raw.data.links[l] === link.id)
    expect(raw.data.countries[raw.data.country[i]]).toBe("DE")
    expect(raw.data.referrer_hosts[raw.data.referrer[i]]).toBe("news.example.org")
    expect(Object.keys(raw.data.visitors[raw.data.visitor[i]]).sort()).toEqual(["bot", "browser", "device", "visitor"])
    expect(record.value).not.toContain("127.0.0.1")
    expect(record.value).not.toContain(CHROME)
    expect(record.value).not.toContain("Mozilla")
    expect(record.value).not.toContain("story?id=7")
  })

  it("the same visitor gets the same visitor hash on the same day; another user agent another", async () => {
    const link = await createLink(env(), "https://example.com/twice")
    await waitFor(async () => {
      expect(r.info.table.has(`/${link.slug}`)).toBe(true)
      return true
    })
    await hit(`${r.base}/${link.slug}`, { headers: { "user-agent": CHROME } })
    await hit(`${r.base}/${link.slug}`, { headers: { "user-agent": CHROME } })
    await hit(`${r.base}/${link.slug}`, { headers: { "user-agent": `${CHROME} Other/1.0` } })
    let clicks: Awaited<ReturnType<typeof clicksOf>> = []
    await waitFor(async () => {
      clicks = await clicksOf(env(), link.id)
      expect(clicks.length).toBe(3)
      return true
    })
    const visitors = clicks.map((c) => c.click.visitor)
    expect(visitors[0]).toBe(visitors[1])
    expect(visitors[2]).not.toBe(visitors[0])
  })

  it("a link-preview fetcher's GET is a click with bot: true", async () => {
    const link = await createLink(env(), "https://example.com/previewed")
    await waitFor(async () => {
      expect(r.info.table.has(`/${link.slug}`)).toBe(true)
      return true
    })
    expect((await hit(`${r.base}/${link.slug}`, { headers: { "user-agent": SLACKBOT } })).status).toBe(302)
    await waitFor(async () => {
      const clicks = await clicksOf(env(), link.id)
      expect(clicks.length).toBe(1)
      expect(clicks[0]!.click.bot).toBe(true)
      expect(clicks[0]!.click.country).toBeNull()
      expect(clicks[0]!.click.referrer_host).toBeNull()
      return true
    })
  })

  it("HEAD redirects without a body and is not a click", async () => {
    const headed = await createLink(env(), "https://example.com/headed")
    const marker = await createLink(env(), "https://example.com/marker")
    await waitFor(async () => {
      expect(r.info.table.has(`/${headed.slug}`)).toBe(true)
      expect(r.info.table.has(`/${marker.slug}`)).toBe(true)
      return true
    })
    const res = await hit(`${r.base}/${headed.slug}`, { method: "HEAD", headers: { "user-agent": CHROME } })
    expect(res.status).toBe(302)
    expect(res.headers.get("location")).toBe("https://example.com/headed")
    expect(res.headers.get("cache-control")).toBe("private, no-store")
    expect(res.body).toBe("")
    // Clicks are published in order: once the later GET's click is in the log, a click
    // of the HEAD would be too.
    await hit(`${r.base}/${marker.slug}`, { headers: { "user-agent": CHROME } })
    await waitFor(async () => {
      expect((await clicksOf(env(), marker.id)).length).toBe(1)
      return true
    })
    expect(await clicksOf(env(), headed.id)).toEqual([])
  })

  it("HEAD and GET share one keep-alive connection without a stray body between them", async () => {
    const link = await createLink(env(), "https://example.com/keepalive")
    await waitFor(async () => {
      expect(r.info.table.has(`/${link.slug}`)).toBe(true)
      return true
    })
    const { port } = new URL(r.base)
    const net = await import("node:net")
    const text = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), "127.0.0.1", () =>
        socket.write(
          `HEAD /NoSuchSlug42 HTTP/1.1\r\nHost: x\r\n\r\nGET /${link.slug} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`
        )
      )
      let out = ""
      socket.on("data", (d) => {
        out += d.toString("latin1")
      })
      socket.on("error", reject)
      socket.on("close", () => resolve(out))
    })
    const responses = text.split(/(?=HTTP\/1\.1 )/)
    expect(responses.map((x) => x.split("\r\n")[0])).toEqual(["HTTP/1.1 404 Not Found", "HTTP/1.1 302 Found"])
    expect(responses[0]!.endsWith("\r\n\r\n")).toBe(true)
  })

  it("clicks still buffered when the redirector closes are published before it is gone", async () => {
    const link = await createLink(env(), "https://example.com/last-click")
    await waitFor(async () => {
      expect(r.info.table.has(`/${link.slug}`)).toBe(true)
      return true
    })
    expect((await hit(`${r.base}/${link.slug}`, { headers: { "user-agent": CHROME } })).status).toBe(302)
    await r.close()
    expect((await clicksOf(env(), link.id)).length).toBe(1)
    r = await startRedirector(env(), engine)
  })

  it("a restarted redirector finds every link again, loaded from PostgreSQL", async () => {
    const kept = await createLink(env(), "https://example.com/kept")
    const changed = await createLink(env(), "https://example.com/old")
    const gone = await createLink(env(), "https://example.com/gone")
    await call(`${env().api.api}/links/${changed.id}`, {
      method: "PATCH",
      key: env().account.key,
      body: { url: "https://example.com/new" }
    })
    await call(`${env().api.api}/links/${gone.id}`, { method: "DELETE", key: env().account.key })
    await waitFor(async () => {
      expect(r.info.table.has(`/${gone.slug}`)).toBe(false)
      return true
    })
    const activeBefore = r.info.table.size
    const oldBase = r.base
    await r.close()
    // The listener is gone: a new connection is refused.
    const net = await import("node:net")
    const refused = await new Promise<boolean>((resolve) => {
      const socket = net.connect(Number(new URL(oldBase).port), "127.0.0.1")
      socket.on("connect", () => {
        socket.destroy()
        resolve(false)
      })
      socket.on("error", () => resolve(true))
    })
    expect(refused).toBe(true)
    r = await startRedirector(env(), engine)
    // Follows from the end of the log: whatever it has, it loaded from the database.
    expect(r.info.table.size).toBe(activeBefore)
    expect((await hit(`${r.base}/${kept.slug}`)).headers.get("location")).toBe("https://example.com/kept")
    expect((await hit(`${r.base}/${changed.slug}`)).headers.get("location")).toBe("https://example.com/new")
    expect((await hit(`${r.base}/${gone.slug}`)).status).toBe(404)
  })
})

describe("visitor secrets (shared through PostgreSQL, rotated daily)", () => {
  const query = async <T>(text: string, values: Array<unknown> = []) => {
    const client = new pg.Client({ connectionString: env().api.databaseUrl })
    await client.connect()
    try {
      return (await client.query(text, values)).rows as Array<T>
    } finally {
      await client.end()
    }
  }

  it("every instance hashes with the same stored secret of the day, and days before yesterday are deleted", async () => {
    const today = utcDay(Date.now())
    await query("DELETE FROM visitor_secrets")
    await query("INSERT INTO visitor_secrets (day, secret) VALUES ($1, $2), ($3, $4)", [
      dayString(today - 3),
      Buffer.alloc(32, 3),
      dayString(today - 1),
      Buffer.alloc(32, 1)
    ])
    const [one, two] = await Promise.all([startRedirector(env(), "uws"), startRedirector(env(), "node")])
    try {
      const link = await createLink(env(), "https://example.com/secret")
      await waitFor(async () => {
        expect(one.info.table.has(`/${link.slug}`)).toBe(true)
        expect(two.info.table.has(`/${link.slug}`)).toBe(true)
        return true
      })
      await Promise.all([
        hit(`${one.base}/${link.slug}`, { headers: { "user-agent": CHROME } }),
        hit(`${two.base}/${link.slug}`, { headers: { "user-agent": CHROME } })
      ])
      let clicks: Awaited<ReturnType<typeof clicksOf>> = []
      await waitFor(async () => {
        clicks = await clicksOf(env(), link.id)
        expect(clicks.length).toBe(2)
        return true
      })
      const rows = await query<{ day: string; secret: Buffer }>(
        "SELECT to_char(day, 'YYYY-MM-DD') AS day, secret FROM visitor_secrets ORDER BY day"
      )
      expect(rows.map((r) => r.day)).toEqual([dayString(today - 1), dayString(today)])
      // A click just before midnight UTC may have used the next day's secret: compare by its own day.
      const secretOf = (at: number) => rows.find((r) => r.day === dayString(utcDay(at)))!.secret
      for (const { click } of clicks) {
        expect(click.visitor).toBe(visitorHash(secretOf(click.at), "127.0.0.1", CHROME))
      }
      if (utcDay(clicks[0]!.click.at) === utcDay(clicks[1]!.click.at)) {
        expect(clicks[0]!.click.visitor).toBe(clicks[1]!.click.visitor)
      }
      expect(rows[1]!.secret.length).toBe(32)
    } finally {
      await Promise.all([one.close(), two.close()])
    }
  })
})

describe("click capture when the event log fails", () => {
  const entry = { location: "https://e.com/", linkId: "link_x", accountId: "acc_x", expiresAt: Infinity }
  const secrets = { get: () => Effect.succeed(new Uint8Array(32)) }

  /** An event log whose publish fails while `failing` says so, recording what got through. */
  const flakyLog = (failing: () => boolean) => {
    const published: Array<OutgoingRecord> = []
    let attempts = 0
    const layer = Layer.succeed(EventLog, {
      publish: (_topic: string, records: ReadonlyArray<OutgoingRecord>) =>
        Effect.suspend(() => {
          attempts++
          if (failing()) return Effect.fail(new EventLogError({ message: "broker down" }))
          published.push(...records)
          return Effect.void
        })
    } as unknown as EventLog["Type"])
    return { layer, published, attempts: () => attempts }
  }

  const quiet = Logger.minimumLogLevel(LogLevel.None)
  const clicksIn = (records: ReadonlyArray<OutgoingRecord>) =>
    records.reduce((n, r) => n + batchedClicks(JSON.parse(r.value).data).length, 0)

  it("a failed publish keeps the batch and retries it until it goes through, each click once", async () => {
    let down = true
    const log = flakyLog(() => down)
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 10 })
          for (let i = 0; i < 3; i++) buffer.record(...clickOn(entry), Date.now(), "192.0.2.1", CHROME, "", "")
          yield* waitForEffect(
            Effect.sync(() => {
              expect(log.attempts()).toBeGreaterThanOrEqual(2)
              return true
            })
          )
          expect(log.published).toEqual([])
          expect(buffer.count + buffer.waiting).toBe(3)
          down = false
          yield* waitForEffect(
            Effect.sync(() => {
              expect(clicksIn(log.published)).toBe(3)
              return true
            })
          )
          expect(buffer.count + buffer.waiting).toBe(0)
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    expect(log.published.length).toBe(1)
    expect(log.published.every((r) => r.key === "acc_x")).toBe(true)
  })

  it("one clicks.recorded event per account per round, at most clicksPerEvent clicks each, in click order", async () => {
    const log = flakyLog(() => false)
    const other = { ...entry, linkId: "link_y", accountId: "acc_y" }
    const t0 = Date.now()
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 10, clicksPerEvent: 2 })
          for (let i = 0; i < 5; i++) {
            buffer.record(...clickOn(entry), t0 + i, "192.0.2.1", CHROME, "", "")
            if (i < 2) buffer.record(...clickOn(other), t0 + i, "192.0.2.2", SLACKBOT, "https://a.example/x", "fr")
          }
          yield* waitForEffect(
            Effect.sync(() => {
              expect(clicksIn(log.published)).toBe(7)
              return true
            })
          )
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    const events = log.published.map((r) => ({ key: r.key, event: JSON.parse(r.value) }))
    const of = (key: string) => events.filter((e) => e.key === key).map((e) => e.event)
    expect(of("acc_x").map((e) => batchedClicks(e.data).map((c) => c.at - t0))).toEqual([[0, 1], [2, 3], [4]])
    expect(of("acc_x").every((e) => e.version === 3 && e.account_id === "acc_x")).toBe(true)
    expect(of("acc_y")).toHaveLength(1)
    expect(of("acc_y")[0].account_id).toBe("acc_y")
    expect(of("acc_y")[0].data.links).toEqual(["link_y"])
    expect(batchedClicks(of("acc_y")[0].data)[0]).toEqual({
      at: t0,
      country: "FR",
      referrer_host: "a.example",
      device: expect.any(String),
      browser: expect.any(String),
      bot: true,
      visitor: expect.stringMatching(/^[0-9a-f]{16}$/)
    })
    expect(new Set(events.map((e) => e.event.id)).size).toBe(events.length)
    for (const e of events) expect(Schema.decodeUnknownSync(ClickEvent)(e.event).type).toBe("clicks.recorded")
  })

  it("several links of one account share its events: each click keeps its link, and `at` steps from the click before it in the event", async () => {
    const log = flakyLog(() => false)
    const z = { ...entry, linkId: "link_z" }
    const y = { ...entry, linkId: "link_y", accountId: "acc_y" }
    const t0 = Date.now()
    // x, z and y interleaved; x and z of acc_x, y of acc_y; one second back on the clock at the end.
    const sent: Array<[typeof entry, number]> = [
      [entry, 0],
      [z, 3],
      [y, 4],
      [z, 4],
      [entry, 10],
      [z, 25],
      [y, 30],
      [entry, 26],
      [z, -1000]
    ]
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 60_000, batchSize: 1_000_000 })
          for (const [l, dt] of sent) buffer.record(...clickOn(l), t0 + dt, "192.0.2.1", CHROME, "", "")
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    const events = log.published.map((r) => ({ key: r.key, event: JSON.parse(r.value) }))
    expect(events.map((e) => e.key)).toEqual(["acc_x", "acc_y"])
    const [x, yEvent] = events.map((e) => e.event)
    expect(x.data.links).toEqual(["link_x", "link_z"])
    expect(x.data.link).toEqual([0, 1, 1, 0, 1, 0, 1])
    expect(x.data.at).toEqual([t0, 3, 1, 6, 15, 1, -1026])
    expect(linkedClicks(x.data).map((c) => [c.link_id, c.at - t0])).toEqual(
      sent.filter(([l]) => l.accountId === "acc_x").map(([l, dt]) => [l.linkId, dt])
    )
    expect(yEvent.data).toMatchObject({ links: ["link_y"], link: [0, 0], at: [t0 + 4, 26] })
    for (const { event } of events) expect(Schema.decodeUnknownSync(ClickEvent)(event).version).toBe(3)
  })

  it("an account's event ends when its lists reach their size cap, before clicksPerEvent: every click once, in order", async () => {
    const log = flakyLog(() => false)
    const t0 = Date.now()
    const n = 4_000
    // Link ids of 250 characters: each click's link is a new entry in the event's list.
    const linkOf = (i: number) => `link_${String(i).padStart(245, "0")}`
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 60_000, batchSize: 1_000_000 })
          for (let i = 0; i < n; i++)
            buffer.record(...clickOn({ linkId: linkOf(i), accountId: "acc_x" }), t0 + i, "192.0.2.1", CHROME, "", "")
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    expect(log.published.length).toBeGreaterThanOrEqual(3)
    for (const r of log.published) expect(r.value.length).toBeLessThan(500_000)
    const clicks = log.published.flatMap((r) => linkedClicks(JSON.parse(r.value).data))
    expect(clicks.map((c) => [c.link_id, c.at - t0])).toEqual(Array.from({ length: n }, (_, i) => [linkOf(i), i]))
  })

  it("when the day's secret cannot be read, the clicks wait in the buffer and go out once it can", async () => {
    const log = flakyLog(() => false)
    let secretFailures = 0
    const flakySecrets = {
      get: () =>
        Effect.suspend(() =>
          secretFailures++ < 2 ? Effect.fail(new EventLogError({ message: "database down" })) : secrets.get()
        )
    } as unknown as typeof secrets
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(flakySecrets as never, { intervalMs: 10 })
          for (let i = 0; i < 4; i++) buffer.record(...clickOn(entry), Date.now(), "192.0.2.1", CHROME, "", "")
          yield* waitForEffect(
            Effect.sync(() => {
              expect(clicksIn(log.published)).toBe(4)
              return true
            })
          )
          expect(secretFailures).toBeGreaterThanOrEqual(3)
          expect(buffer.count + buffer.waiting).toBe(0)
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    expect(new Set(log.published.map((r) => JSON.parse(r.value).id)).size).toBe(log.published.length)
  })

  it("a round of more clicks than its first arrays hold keeps every click, in order, with its own fields; an address as bytes is the same visitor as its text", async () => {
    const log = flakyLog(() => false)
    const other = { ...entry, linkId: "link_y", accountId: "acc_y" }
    const v4 = new Uint8Array([192, 0, 2, 1]).buffer
    const mapped = new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1]).buffer
    const v6 = new Uint8Array([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]).buffer
    const peers: Array<ArrayBuffer | string> = [v4, mapped, "192.0.2.1", v6, "2001:db8::1"]
    const referers = ["", "https://a.example/x", "https://b.example/y"]
    const countries = ["", "fr", "DE"]
    const agents = [CHROME, SLACKBOT]
    const n = 40_000 // the first arrays of a round hold 16384
    const t0 = Date.now()
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 60_000, batchSize: 1_000_000 })
          for (let i = 0; i < n; i++) {
            const link = i % 7 === 0 ? other : entry
            buffer.record(...clickOn(link), t0 + i, peers[i % 5]!, agents[i % 2]!, referers[i % 3]!, countries[i % 3]!)
          }
          expect(buffer.count).toBe(n)
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    const events = log.published.map((r) => JSON.parse(r.value))
    const clicks = events.flatMap((e) => linkedClicks(e.data).map(({ link_id, ...c }) => ({ link: link_id, ...c })))
    expect(clicks).toHaveLength(n)
    const byLink = (link: string) => clicks.filter((c) => c.link === link).map((c) => (c.at as number) - t0)
    expect(byLink("link_y")).toEqual(Array.from({ length: n }, (_, i) => i).filter((i) => i % 7 === 0))
    expect(byLink("link_x")).toEqual(Array.from({ length: n }, (_, i) => i).filter((i) => i % 7 !== 0))
    const secret = new Uint8Array(32)
    for (const c of clicks) {
      const i = (c.at as number) - t0
      expect(c.referrer_host).toBe([null, "a.example", "b.example"][i % 3])
      expect(c.country).toBe([null, "FR", "DE"][i % 3])
      expect(c.bot).toBe(i % 2 === 1)
      const address = i % 5 < 3 ? "192.0.2.1" : "2001:db8::1"
      expect(c.visitor).toBe(visitorHash(secret, address, agents[i % 2]!))
    }
  })

  it("each click keeps its link's exact id across events of many links, ids JSON escapes among them, each once per event", async () => {
    const log = flakyLog(() => false)
    // Ids the slug table holds byte for byte (visible ASCII), two of them with characters JSON escapes.
    const links = [
      ...Array.from({ length: 3_000 }, (_, k) => ({ ...entry, linkId: `link_${k}` })),
      { ...entry, linkId: 'lnk_"quoted"' },
      { ...entry, linkId: "lnk_back\\slash" }
    ]
    const n = 12_000
    const t0 = Date.now()
    const linkOf = (i: number) => links[(i * 7919) % links.length]!
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, {
            intervalMs: 60_000,
            batchSize: 1_000_000,
            clicksPerEvent: 1_000
          })
          for (let i = 0; i < n; i++) buffer.record(...clickOn(linkOf(i)), t0 + i, "192.0.2.1", CHROME, "", "")
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    const events = log.published.map((r) => JSON.parse(r.value))
    expect(events.length).toBe(12)
    for (const e of events) expect(new Set(e.data.links).size).toBe(e.data.links.length)
    const clicks = events.flatMap((e) => linkedClicks(e.data)).sort((a, b) => (a.at as number) - (b.at as number))
    expect(clicks.map((c) => c.link_id)).toEqual(Array.from({ length: n }, (_, i) => linkOf(i).linkId))
    expect(clicks.filter((c) => c.link_id === 'lnk_"quoted"').length).toBeGreaterThan(0)
    expect(clicks.filter((c) => c.link_id === "lnk_back\\slash").length).toBeGreaterThan(0)
  })

  it("an account's group, kept for the next round, serves another account there: each event holds its own account's clicks and links only", async () => {
    const log = flakyLog(() => false)
    // More accounts than the groups kept between rounds, in another order and number each round.
    const accounts = ["acc_a", "acc_b", "acc_c", "acc_d", "acc_e", "acc_f"]
    const linkOf = (account: string, k: number) => ({
      ...entry,
      linkId: `link_${account}_${k % 50}`,
      accountId: account
    })
    const t0 = Date.now()
    const sent: Array<{ at: number; link_id: string; account: string }> = []
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { intervalMs: 10, clicksPerEvent: 40 })
          for (let round = 0; round < 4; round++) {
            const order = round % 2 === 0 ? accounts : [...accounts].reverse().slice(0, 3 + round)
            for (const account of order) {
              for (let k = 0; k < 60; k++) {
                const link = linkOf(account, k * 7 + round)
                const at = t0 + sent.length
                buffer.record(...clickOn(link), at, "192.0.2.1", CHROME, "", "")
                sent.push({ at, link_id: link.linkId, account })
              }
            }
            // The round goes out before the next one starts.
            yield* waitForEffect(
              Effect.sync(() => {
                expect(clicksIn(log.published)).toBe(sent.length)
                return true
              })
            )
          }
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    const events = log.published.map((r) => ({ key: r.key, event: JSON.parse(r.value) }))
    for (const { key, event } of events) {
      expect(event.account_id).toBe(key)
      expect(event.data.links.filter((id: string) => !id.startsWith(`link_${key}_`))).toEqual([])
      expect(new Set(event.data.links).size).toBe(event.data.links.length)
    }
    const clicks = events
      .flatMap(({ event }) =>
        linkedClicks(event.data).map((c) => ({ at: c.at as number, link_id: c.link_id, account: event.account_id }))
      )
      .sort((x, y) => x.at - y.at)
    expect(clicks).toEqual(sent)
  })

  it("memory is bounded: beyond the cap clicks are dropped and counted, not buffered", async () => {
    const log = flakyLog(() => true)
    const buffer = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const buffer = yield* makeClickCapture(secrets, { maxBuffered: 5, intervalMs: 10, drainMs: 100 })
          for (let i = 0; i < 12; i++) buffer.record(...clickOn(entry), Date.now(), "192.0.2.1", CHROME, "", "")
          yield* waitForEffect(
            Effect.sync(() => {
              expect(log.attempts()).toBeGreaterThanOrEqual(1)
              return true
            })
          )
          for (let i = 0; i < 3; i++) buffer.record(...clickOn(entry), Date.now(), "192.0.2.1", CHROME, "", "")
          expect(buffer.count + buffer.waiting).toBe(5)
          expect(buffer.dropped).toBe(10)
          return buffer
        })
      ).pipe(Effect.provide(log.layer), Effect.provide(quiet))
    )
    expect(buffer.dropped).toBe(10)
    expect(log.published).toEqual([])
  })
})

const brokers = testKafkaBrokers()

describe.skipIf(brokers === undefined)("redirector over Kafka (needs TEST_KAFKA_BROKERS)", () => {
  const kafka = useEnv(brokers)
  let r: Running
  beforeAll(async () => {
    r = await startRedirector(kafka(), "uws")
  })
  afterAll(async () => {
    await r?.close()
  })

  it("links.v1 from Kafka keeps the slug table current: new, changed and disabled links", async () => {
    const env = kafka()
    const link = await createLink(env, "https://example.com/k-before")
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).headers.get("location")).toBe("https://example.com/k-before")
      return true
    })
    await call(`${env.api.api}/links/${link.id}`, {
      method: "PATCH",
      key: env.account.key,
      body: { url: "https://example.com/k-after" }
    })
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).headers.get("location")).toBe("https://example.com/k-after")
      return true
    })
    await call(`${env.api.api}/links/${link.id}`, { method: "DELETE", key: env.account.key })
    await waitFor(async () => {
      expect((await hit(`${r.base}/${link.slug}`)).status).toBe(404)
      return true
    })
  })

  it("a GET becomes a clicks.v1 message on Kafka, keyed by account id, without address or user agent", async () => {
    const env = kafka()
    const link = await createLink(env, "https://example.com/k-click")
    await waitFor(async () => {
      expect(r.info.table.has(`/${link.slug}`)).toBe(true)
      return true
    })
    await hit(`${r.base}/${link.slug}`, { headers: { "user-agent": CHROME } })
    await waitFor(async () => {
      const clicks = await clicksOf(env, link.id)
      expect(clicks.length).toBe(1)
      expect(clicks[0]!.record.key).toBe(env.account.accountId)
      expect(clicks[0]!.click.browser).toBe("Chrome")
      expect(clicks[0]!.record.value).not.toContain("127.0.0.1")
      expect(clicks[0]!.record.value).not.toContain(CHROME)
      return true
    })
  })

  it("a restarted redirector finds the links in PostgreSQL and follows Kafka from the end", async () => {
    const env = kafka()
    const link = await createLink(env, "https://example.com/k-restart")
    await waitFor(async () => {
      expect(r.info.table.has(`/${link.slug}`)).toBe(true)
      return true
    })
    await r.close()
    r = await startRedirector(env, "uws")
    expect((await hit(`${r.base}/${link.slug}`)).headers.get("location")).toBe("https://example.com/k-restart")
  })
})
