/**
 * A minimal WARC reader, independent of warcio: records are a version line, header lines, an
 * empty line, Content-Length bytes of block, then CRLF CRLF. For request and response records
 * the block is an HTTP message; its body follows the first empty line.
 */
export interface WarcRecord {
  readonly version: string
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>
  readonly block: Buffer
  /** The HTTP payload of request and response records. */
  readonly httpBody: Buffer | undefined
}

const CRLFCRLF = Buffer.from("\r\n\r\n")

export const readWarc = (bytes: Buffer): Array<WarcRecord> => {
  const out: Array<WarcRecord> = []
  let at = 0
  while (at < bytes.length) {
    const headEnd = bytes.indexOf(CRLFCRLF, at)
    if (headEnd < 0) throw new Error(`truncated WARC header at ${at}`)
    const [version, ...lines] = bytes.subarray(at, headEnd).toString("utf8").split("\r\n")
    if (!version?.startsWith("WARC/")) throw new Error(`not a WARC record at ${at}: ${version}`)
    const headers: Record<string, string> = {}
    for (const line of lines) {
      const colon = line.indexOf(":")
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
    }
    const length = Number(headers["content-length"])
    if (!Number.isInteger(length)) throw new Error("record without Content-Length")
    const block = bytes.subarray(headEnd + 4, headEnd + 4 + length)
    if (block.length !== length) throw new Error("truncated block")
    if (!bytes.subarray(headEnd + 4 + length, headEnd + 8 + length).equals(CRLFCRLF)) {
      throw new Error("record not followed by CRLF CRLF")
    }
    const type = headers["warc-type"]
    let httpBody: Buffer | undefined
    if (type === "request" || type === "response") {
      const split = block.indexOf(CRLFCRLF)
      httpBody = split < 0 ? Buffer.alloc(0) : block.subarray(split + 4)
    }
    out.push({ version, headers, block, httpBody })
    at = headEnd + 8 + length
  }
  return out
}
