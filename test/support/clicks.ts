import type { BatchedClick, ClicksRecorded, ClicksRecordedV2 } from "../../domain/Events.js"

interface Head {
  readonly id: string
  readonly occurred_at: string
  readonly account_id: string
}

/** Clicks column by column (clicks.recorded version 2), written here independently of the redirector. */
const columns = (linkId: string, clicks: ReadonlyArray<BatchedClick>): ClicksRecordedV2["data"] => {
  const lists = {
    countries: [] as Array<string | null>,
    referrer_hosts: [] as Array<string | null>,
    visitors: [] as Array<ClicksRecordedV2["data"]["visitors"][number]>
  }
  const indexOf = <A>(list: Array<A>, value: A) => {
    const i = list.findIndex((v) => JSON.stringify(v) === JSON.stringify(value))
    return i >= 0 ? i : list.push(value) - 1
  }
  let last = 0
  return {
    link_id: linkId,
    ...lists,
    at: clicks.map((c) => {
      const d = c.at - last
      last = c.at
      return d
    }),
    country: clicks.map((c) => indexOf(lists.countries, c.country)),
    referrer: clicks.map((c) => indexOf(lists.referrer_hosts, c.referrer_host)),
    visitor: clicks.map((c) =>
      indexOf(lists.visitors, { visitor: c.visitor, device: c.device, browser: c.browser, bot: c.bot })
    )
  }
}

/** One clicks.recorded event of a link, in either version of its layout. */
export const clicksRecorded = (
  version: 1 | 2,
  head: Head,
  linkId: string,
  clicks: ReadonlyArray<BatchedClick>
): ClicksRecorded | ClicksRecordedV2 =>
  version === 1
    ? { ...head, type: "clicks.recorded", version, data: { link_id: linkId, clicks } }
    : { ...head, type: "clicks.recorded", version, data: columns(linkId, clicks) }
