import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Deferred, Effect, Layer, Option, Schedule, type Scope, Stream } from "effect"
import { Notifications } from "../../domain/ports/Notifications.js"

/**
 * LISTENs on a channel for as long as the scope lives (re-listening after a failure) and
 * returns once notifications arrive, so that none sent after it returns is missed. Gives up
 * waiting after about two seconds: the callers poll as well.
 */
export const listenInBackground = (
  sql: PgClient.PgClient,
  channel: string,
  scope: Scope.Scope,
  onPayload: (payload: string) => void
) =>
  Effect.gen(function* () {
    const ready = yield* Deferred.make<void>()
    const probe = `probe:${randomUUID()}`
    yield* sql.listen(channel).pipe(
      Stream.runForEach((payload) =>
        payload === probe ? Deferred.succeed(ready, undefined) : Effect.sync(() => onPayload(payload))
      ),
      Effect.tapError((e) => Effect.logWarning(`LISTEN ${channel} failed; polling until it is back`, e)),
      Effect.retry(Schedule.spaced("1 second")),
      Effect.forkIn(scope)
    )
    yield* sql
      .notify(channel, probe)
      .pipe(
        Effect.ignore,
        Effect.zipRight(Deferred.await(ready).pipe(Effect.timeoutOption(100))),
        Effect.repeat({ until: Option.isSome, times: 20 })
      )
  })

/** LISTEN/NOTIFY of PostgreSQL; each `listen` holds its own listening connection. */
export const NotificationsLive: Layer.Layer<Notifications, never, PgClient.PgClient> = Layer.effect(
  Notifications,
  Effect.map(PgClient.PgClient, (sql) =>
    Notifications.of({
      listen: (channel, onPayload) =>
        Effect.flatMap(Effect.scope, (scope) => listenInBackground(sql, channel, scope, onPayload))
    })
  )
)
