// A read-only view of a body received as a list of chunks, addressed by one global byte
// position. The reply scanner reads through it so a large engine reply is never copied
// into one contiguous Buffer: allocating and filling fresh memory costs far more than
// the scan itself. Small slices that straddle a chunk
// boundary are copied; large spans are only ever handed out as views.

export class ByteChunks {
  readonly chunks: readonly Buffer[];
  readonly length: number;
  readonly #starts: number[];
  // The chunk that served the last access: reads move forward, so it usually still holds.
  #cur = 0;
  #curStart = 0;
  #curEnd = 0;

  constructor(chunks: readonly Buffer[]) {
    this.chunks = chunks.filter((c) => c.length > 0);
    this.#starts = [];
    let at = 0;
    for (const c of this.chunks) {
      this.#starts.push(at);
      at += c.length;
    }
    this.length = at;
    this.#curEnd = this.chunks.length > 0 ? this.chunks[0]!.length : 0;
  }

  /** Index of the chunk holding position `p` (0 <= p < length). */
  #locate(p: number): number {
    if (p >= this.#curStart && p < this.#curEnd) return this.#cur;
    let lo = 0;
    let hi = this.chunks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.#starts[mid]! <= p) lo = mid;
      else hi = mid - 1;
    }
    this.#cur = lo;
    this.#curStart = this.#starts[lo]!;
    this.#curEnd = this.#curStart + this.chunks[lo]!.length;
    return lo;
  }

  /** The byte at `p`, or undefined outside the body. */
  at(p: number): number | undefined {
    if (p >= this.#curStart && p < this.#curEnd) return this.chunks[this.#cur]![p - this.#curStart];
    if (p < 0 || p >= this.length) return undefined;
    const i = this.#locate(p);
    return this.chunks[i]![p - this.#starts[i]!];
  }

  /** The first position >= `from` holding `byte`, or -1. */
  indexOf(byte: number, from: number): number {
    if (from >= this.length) return -1;
    for (let i = this.#locate(Math.max(0, from)); i < this.chunks.length; i++) {
      const start = this.#starts[i]!;
      const found = this.chunks[i]!.indexOf(byte, Math.max(0, from - start));
      if (found !== -1) return start + found;
    }
    return -1;
  }

  /** Views of bytes [start, end), one per chunk touched; never a copy. */
  views(start: number, end: number): Buffer[] {
    const out: Buffer[] = [];
    if (end <= start) return out;
    for (let i = this.#locate(start); i < this.chunks.length && this.#starts[i]! < end; i++) {
      const s = this.#starts[i]!;
      const c = this.chunks[i]!;
      out.push(c.subarray(Math.max(0, start - s), Math.min(c.length, end - s)));
    }
    return out;
  }

  /** UTF-8 text of bytes [start, end) (for the small slices that get JSON.parse'd). */
  toString(start: number, end: number): string {
    const parts = this.views(start, end);
    if (parts.length === 1) return parts[0]!.toString("utf8");
    return Buffer.concat(parts).toString("utf8");
  }
}
