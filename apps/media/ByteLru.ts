/**
 * Least recently used byte arrays, bounded by their total size. Keys are blob keys, whose
 * bytes never change, so an entry is never stale; one larger than an eighth of the bound
 * is not kept (it would flush everything else).
 */
export class ByteLru {
  private readonly entries = new Map<string, Uint8Array>()
  size = 0
  constructor(readonly maxBytes: number) {}
  get(key: string): Uint8Array | undefined {
    const bytes = this.entries.get(key)
    if (bytes !== undefined) {
      this.entries.delete(key)
      this.entries.set(key, bytes)
    }
    return bytes
  }
  set(key: string, bytes: Uint8Array): void {
    if (bytes.byteLength > this.maxBytes / 8 || this.entries.has(key)) return
    this.entries.set(key, bytes)
    this.size += bytes.byteLength
    for (const [k, v] of this.entries) {
      if (this.size <= this.maxBytes) break
      this.entries.delete(k)
      this.size -= v.byteLength
    }
  }
}
