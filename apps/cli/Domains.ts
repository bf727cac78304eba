import { Effect, Schema } from "effect"
import { AccountId } from "../../domain/Account.js"
import type { DomainRecord } from "../../domain/Domain.js"
import { DomainRepo } from "../../domain/ports/DomainRepo.js"
import { toApiDomain } from "../api/Domains/Api.js"

const PAGE = 500

/** Whether the text is shaped like an account id (anything else names no account). */
export const isAccountId = Schema.is(AccountId)

/**
 * `domains list --account ID`: every custom domain of the account, newest first, as the API
 * shows them (disabled ones too), for an operator.
 */
export const listDomains = (accountId: AccountId) =>
  Effect.gen(function* () {
    const repo = yield* DomainRepo
    const all: Array<DomainRecord> = []
    let afterSeq: bigint | undefined
    while (true) {
      const page = yield* repo.list(accountId, { afterSeq, limit: PAGE })
      all.push(...page)
      if (page.length < PAGE) break
      afterSeq = page.at(-1)!.seq
    }
    return { account_id: accountId, domains: all.map(toApiDomain) }
  })
