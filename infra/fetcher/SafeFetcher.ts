import { promises as dns } from "node:dns"
import * as http from "node:http"
import * as https from "node:https"
import { isIP, type LookupFunction, type Socket } from "node:net"
import { Data, Duration, Effect, Layer, Schedule } from "effect"
import { type AddressClass, classifyAddress, urlHost } from "../../domain/AddressPolicy.js"
import { UrlNotAllowed } from "../../domain/Errors.js"
import {
  type FetchError,
  type FetchedResponse,
  type FetchOptions,
  RedirectNotAllowed,
  SafeFetcher,
  type SafeFetcherService,
  SourceForbidden,
  SourceRejected,
  SourceTooLarge,
  SourceUnreachable
} from "../../domain/ports/SafeFetcher.js"
import { AppConfig } from "../AppConfig.js"

export interface SafeFetcherOptions {
  /** Lets 127.0.0.0/8 and ::1 through. For tests only; every other refused range stays refused. */
  readonly allowLoopback?: boolean
  /**
   * The service's own hosts, `host:port` (that port only) or `host` (every port). A URL on
   * one of them is refused, so the service never fetches from itself.
   */
  readonly ownHosts?: ReadonlyArray<string>
  /** Name resolution, called once per hop: every address it returns is checked. Default: the system resolver. */
  readonly resolve?: (hostname: string) => Promise<ReadonlyArray<string>>
  /** TCP (and TLS) connect bound per attempt; a connect timeout is retried. Default 3 000. */
  readonly connectTimeoutMs?: number
  /** Retries of transient failures (reset or timed-out connect, 5xx) per hop. Default 2. */
  readonly retries?: number
  /** First retry delay, doubling after. Default 200. */
  readonly retryDelayMs?: number
}

const REDIRECTS = new Set([301, 302, 303, 307, 308])
const USER_AGENT = "shortlinks-fetcher/1.0"

/** A failure worth one more attempt: nothing of the body has been read yet. */
class Transient extends Data.TaggedError("Transient")<{ readonly reason: string }> {}
/** The URL breaks a rule; the caller says whether it was the first URL or a redirect. */
class Refused extends Data.TaggedError("Refused")<{ readonly reason: string }> {}

interface Target {
  readonly url: URL
  /** Where to connect; checked. */
  readonly addresses: ReadonlyArray<{ readonly address: string; readonly family: 4 | 6 }>
}

type Hop =
  | { readonly _tag: "Redirect"; readonly location: string }
  | { readonly _tag: "Done"; readonly response: FetchedResponse }

/** How one connection attempt can fail. */
type AttemptError = Transient | SourceUnreachable | SourceTooLarge | SourceForbidden | SourceRejected

const effectivePort = (url: URL) => (url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80)
const hostKey = (hostname: string) => hostname.toLowerCase().replace(/\.+$/, "")

const parseOwnHosts = (entries: ReadonlyArray<string>) =>
  entries.map((entry) => {
    const url = new URL(`http://${entry}`)
    return { host: hostKey(url.hostname), port: /:\d+$/.test(entry) ? Number(url.port || 80) : undefined }
  })

const systemResolve = (hostname: string) =>
  dns.lookup(hostname, { all: true, verbatim: true }).then((list) => list.map((a) => a.address))

/** The URL a Location header leads to from `current`, or why that hop is refused before any lookup. */
export const redirectTarget = (current: URL, location: string): URL | { readonly refused: string } => {
  let next: URL
  try {
    next = new URL(location, current)
  } catch {
    return { refused: "the Location header is not a URL" }
  }
  if (current.protocol === "https:" && next.protocol === "http:") return { refused: "redirect from https to http" }
  return next
}

const joinHeaders = (headers: http.IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

const errorCode = (e: unknown) =>
  typeof e === "object" && e !== null && "code" in e ? String((e as { code: unknown }).code) : String(e)

/** One connection attempt to one checked address of `target`: a redirect, or the whole answer. */
const attempt = (
  target: Target,
  address: { readonly address: string; readonly family: 4 | 6 },
  options: Required<FetchOptions>,
  connectTimeoutMs: number
): Effect.Effect<Hop, AttemptError> =>
  Effect.async((resume) => {
    const { url } = target
    const tls = url.protocol === "https:"
    let settled = false
    // Once a response has started, a failure is final: part of it may have been read.
    let responded = false
    let connectTimer: NodeJS.Timeout | undefined
    const settle = (result: Effect.Effect<Hop, AttemptError>) => {
      if (settled) return
      settled = true
      clearTimeout(connectTimer)
      req.destroy()
      resume(result)
    }
    // The name was resolved and checked once; the socket goes to that address, whatever
    // the name resolves to now. Node asks for a list when it races address families.
    const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
      if (lookupOptions.all) callback(null, [{ address: address.address, family: address.family }])
      else callback(null, address.address, address.family)
    }
    const req = (tls ? https : http).request({
      protocol: url.protocol,
      host: url.hostname.replace(/^\[|\]$/g, ""),
      port: effectivePort(url),
      path: `${url.pathname}${url.search}`,
      method: "GET",
      agent: false,
      lookup: pinned,
      headers: {
        host: url.host,
        accept: options.accept,
        "accept-encoding": "identity",
        "user-agent": USER_AGENT,
        connection: "close"
      }
    })
    req.on("socket", (socket: Socket) => {
      connectTimer = setTimeout(
        () => settle(Effect.fail(new Transient({ reason: `connect to ${url.host} timed out` }))),
        connectTimeoutMs
      )
      socket.once(tls ? "secureConnect" : "connect", () => clearTimeout(connectTimer))
    })
    req.on("error", (e) => {
      const code = errorCode(e)
      const reason = `${url.host}: ${code}`
      const transient = !responded && (code === "ECONNRESET" || code === "EPIPE")
      settle(Effect.fail(transient ? new Transient({ reason }) : new SourceUnreachable({ reason })))
    })
    req.on("response", (res) => {
      responded = true
      res.on("error", (e) => settle(Effect.fail(new SourceUnreachable({ reason: `${url.host}: ${errorCode(e)}` }))))
      const status = res.statusCode ?? 0
      const location = res.headers.location
      if (REDIRECTS.has(status) && location !== undefined) return settle(Effect.succeed({ _tag: "Redirect", location }))
      if (status === 403) return settle(Effect.fail(new SourceForbidden({ url: url.href })))
      if (status >= 500) return settle(Effect.fail(new Transient({ reason: `${url.host} answered ${status}` })))
      if (status < 200 || status > 299) return settle(Effect.fail(new SourceRejected({ status })))
      const declared = Number(res.headers["content-length"])
      if (Number.isFinite(declared) && declared > options.maxBytes) {
        return settle(Effect.fail(new SourceTooLarge({ limit: options.maxBytes })))
      }
      const chunks: Array<Buffer> = []
      let size = 0
      res.on("data", (chunk: Buffer) => {
        size += chunk.length
        if (size > options.maxBytes) return settle(Effect.fail(new SourceTooLarge({ limit: options.maxBytes })))
        chunks.push(chunk)
      })
      res.on("end", () => {
        if (res.complete) {
          // A fresh array of its own: Buffer.concat may hand out a slice of Node's shared pool.
          const body = new Uint8Array(size)
          let offset = 0
          for (const chunk of chunks) {
            body.set(chunk, offset)
            offset += chunk.length
          }
          settle(
            Effect.succeed({
              _tag: "Done",
              response: {
                finalUrl: withoutHash(url),
                status,
                headers: joinHeaders(res.headers),
                body
              }
            })
          )
        }
      })
      res.on("close", () =>
        settle(
          Effect.fail(new SourceUnreachable({ reason: `${url.host} closed the connection before the body ended` }))
        )
      )
    })
    req.end()
    return Effect.sync(() => {
      settled = true
      clearTimeout(connectTimer)
      req.destroy()
    })
  })

const make = (options: SafeFetcherOptions): SafeFetcherService => {
  const allowLoopback = options.allowLoopback ?? false
  const ownHosts = parseOwnHosts(options.ownHosts ?? [])
  const resolve = options.resolve ?? systemResolve
  const connectTimeoutMs = options.connectTimeoutMs ?? 3_000
  const retries = options.retries ?? 2
  const retryDelay = Duration.millis(options.retryDelayMs ?? 200)

  const allowed = (kind: AddressClass) => kind === "public" || (allowLoopback && kind === "loopback")

  /** Why the URL is refused before any name is resolved, if it is. */
  const literalRefusal = (url: URL): string | undefined => {
    if (url.protocol !== "http:" && url.protocol !== "https:") return `scheme ${url.protocol} is not http or https`
    if (url.username !== "" || url.password !== "") return "the URL carries credentials"
    // Any port is fine: the address rules, not the port, keep internal services out of reach.
    const port = effectivePort(url)
    if (port === 0) return "port 0"
    const host = urlHost(url)
    const key = hostKey(host._tag === "Name" ? host.name : url.hostname)
    if (ownHosts.some((own) => own.host === key && (own.port === undefined || own.port === port))) {
      return "the URL points to this service"
    }
    if (host._tag === "Address") {
      const kind = classifyAddress(host.address)
      if (!allowed(kind)) return `the address ${url.hostname} is not public (${kind})`
    }
    return undefined
  }

  const check = (url: URL): Effect.Effect<Target, Refused | SourceUnreachable> =>
    Effect.gen(function* () {
      const refusal = literalRefusal(url)
      if (refusal !== undefined) return yield* new Refused({ reason: refusal })
      const host = urlHost(url)
      if (host._tag === "Address") return { url, addresses: [{ address: host.address, family: host.family }] }
      const resolved = yield* Effect.tryPromise({
        try: () => resolve(host.name),
        catch: (e) => new SourceUnreachable({ reason: `cannot resolve ${host.name}: ${errorCode(e)}` })
      })
      if (resolved.length === 0) return yield* new SourceUnreachable({ reason: `${host.name} has no address` })
      // One non-public answer refuses the name: a host that mixes them is not one we follow.
      const addresses: Array<Target["addresses"][number]> = []
      for (const address of resolved) {
        const family = isIP(address)
        const kind = family === 0 ? "not-an-address" : classifyAddress(address)
        if (!allowed(kind)) {
          return yield* new Refused({ reason: `${host.name} resolves to ${address}, which is not public (${kind})` })
        }
        addresses.push({ address, family: family === 6 ? 6 : 4 })
      }
      return { url, addresses }
    })

  // Retries reuse the checked addresses, rotating through them.
  const request = (target: Target, options: Required<FetchOptions>) => {
    let n = 0
    return Effect.suspend(() =>
      attempt(target, target.addresses[n++ % target.addresses.length]!, options, connectTimeoutMs)
    ).pipe(
      Effect.retry({
        times: retries,
        schedule: Schedule.exponential(retryDelay),
        while: (e) => e._tag === "Transient"
      }),
      Effect.catchTag("Transient", (e) => Effect.fail(new SourceUnreachable({ reason: e.reason })))
    )
  }

  const fetch = (input: string, fetchOptions: FetchOptions): Effect.Effect<FetchedResponse, FetchError> => {
    const options: Required<FetchOptions> = {
      maxBytes: fetchOptions.maxBytes,
      timeoutMs: fetchOptions.timeoutMs ?? 10_000,
      maxRedirects: fetchOptions.maxRedirects ?? 3,
      accept: fetchOptions.accept ?? "*/*"
    }
    const loop = Effect.gen(function* () {
      let url: URL
      try {
        url = new URL(input)
      } catch {
        return yield* new UrlNotAllowed({ reason: "not a valid URL" })
      }
      let target = yield* check(url).pipe(
        Effect.catchTag("Refused", (e) => Effect.fail(new UrlNotAllowed({ reason: e.reason })))
      )
      for (let redirects = 0; ; redirects++) {
        const hop = yield* request(target, options)
        if (hop._tag === "Done") return hop.response
        const { location } = hop
        if (redirects >= options.maxRedirects) {
          return yield* new RedirectNotAllowed({ location, reason: `more than ${options.maxRedirects} redirects` })
        }
        const next = redirectTarget(target.url, location)
        if (!(next instanceof URL)) return yield* new RedirectNotAllowed({ location, reason: next.refused })
        target = yield* check(next).pipe(
          Effect.catchTag("Refused", (e) => Effect.fail(new RedirectNotAllowed({ location, reason: e.reason })))
        )
      }
    })
    return loop.pipe(
      Effect.timeoutFail({
        duration: Duration.millis(options.timeoutMs),
        onTimeout: () => new SourceUnreachable({ reason: `no complete answer within ${options.timeoutMs} ms` })
      }),
      Effect.withSpan("SafeFetcher.fetch")
    )
  }

  const precheck = (url: string): Effect.Effect<void, UrlNotAllowed> => {
    const refusal = URL.canParse(url) ? literalRefusal(new URL(url)) : "not a URL"
    return refusal === undefined ? Effect.void : Effect.fail(new UrlNotAllowed({ reason: refusal }))
  }

  return { fetch, precheck }
}

const withoutHash = (url: URL) => {
  const copy = new URL(url)
  copy.hash = ""
  return copy.href
}

/** The SafeFetcher with these options (tests, tools). */
export const safeFetcherLayer = (options: SafeFetcherOptions = {}): Layer.Layer<SafeFetcher> =>
  Layer.succeed(SafeFetcher, make(options))

/** Production wiring: the system resolver, loopback refused, and the service's public hosts as its own. */
export const SafeFetcherLive: Layer.Layer<SafeFetcher, never, AppConfig> = Layer.effect(
  SafeFetcher,
  Effect.map(AppConfig, (config) =>
    make({
      ownHosts: [config.apiBase, config.shortBase, config.imageHost, config.snapshotHost].map((base) => {
        const url = new URL(base)
        return `${url.hostname}:${effectivePort(url)}`
      })
    })
  )
)
