import type { ClickRound } from "../../apps/redirector/ClickRound.js"
import { SlugTable } from "../../apps/redirector/SlugTable.js"

/** The one slug table the tests' clicks are recorded on: each link at `/<link id>`. */
const table = new SlugTable()
let version = 0

/**
 * What `ClickBuffer.record` takes for a click on `link`: the slug table and the link's row in
 * it (the link is put in the table, or its account changed, first).
 */
export const clickOn = (link: { readonly linkId: string; readonly accountId: string }): [SlugTable, number] => {
  const path = `/${link.linkId}`
  let row = table.rowOf(path)
  if (row < 0 || table.accountId(row) !== link.accountId) {
    table.apply({
      id: link.linkId,
      accountId: link.accountId,
      slug: link.linkId,
      destinationUrl: "https://e.com/",
      active: true,
      utm: null,
      expiresAt: null,
      updatedAt: ++version
    })
    row = table.rowOf(path)
  }
  return [table, row]
}

/** The link and account id of each of the round's first `n` clicks. */
export const clickLinksOf = (round: ClickRound, n = round.count): Array<[string, string]> =>
  Array.from({ length: n }, (_, i) => [round.linkIdOf(round.run[i]!), round.accountIdOf(round.run[i]!)])
