import { SlugTable } from "../apps/redirector/SlugTable.js"

/**
 * A slug table holding `count` links as bench/seed-links.ts seeds them (slug `s<n>`, id
 * `link_scale<n>`, one account, https://example.com/scale/<n>), for the benchmarks that run
 * the table without a database.
 */
export const scaleTable = (count: number): SlugTable => {
  const table = new SlugTable()
  table.reserve(count)
  for (let n = 1; n <= count; n++) {
    table.apply({
      id: `link_scale${n}`,
      accountId: "acct_bench",
      slug: `s${n}`,
      destinationUrl: `https://example.com/scale/${n}`,
      active: true,
      utm: null,
      expiresAt: null,
      updatedAt: 1
    })
  }
  return table
}
