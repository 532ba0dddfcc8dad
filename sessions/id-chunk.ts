// One chunk of a session's token store (checkpoints.ts): up to a fixed number of token ids
// in as few bytes as they need (issue 47: bytes per token held). Ids are stored as their
// low 16 bits; a high plane of one byte per id (bits 16-23) is added when the first id of
// 65536 or more is written, and only to that chunk. So a chunk costs 2 bytes per id where
// its ids are below 65536 (a vocabulary of up to 64k ids, or a stretch of text made of a
// large vocabulary's common tokens: byte-pair vocabularies number their merges roughly by
// frequency), 3 where they are below 2^24 (every released vocabulary, ~100k-260k ids),
// and 4 for anything else (an engine's id outside that range is kept as Int32Array kept
// it: the verification and the records see what the engine sent).

const LOW = 0x10000;
const HIGH = 0x1000000;

export class IdChunk {
  /** Bits 0-15 of each id (unused once wide). */
  #lo: Uint16Array;
  /** Bits 16-23 of each id: allocated by the first id that needs them. */
  #hi: Uint8Array | undefined;
  /** Every id as int32: once an id is negative or needs more than 24 bits. */
  #wide: Int32Array | undefined;

  constructor(capacity: number) {
    this.#lo = new Uint16Array(capacity);
  }

  /** Id slots. */
  get capacity(): number {
    return this.#wide ? this.#wide.length : this.#lo.length;
  }
  /** Bytes its ids take (for tests and sizing). */
  get bytes(): number {
    return this.#wide ? this.#wide.byteLength : this.#lo.byteLength + (this.#hi?.byteLength ?? 0);
  }

  get(i: number): number {
    if (this.#wide !== undefined) return this.#wide[i]!;
    const hi = this.#hi;
    return hi === undefined ? this.#lo[i]! : this.#lo[i]! | (hi[i]! << 16);
  }

  set(i: number, id: number): void {
    if (this.#wide !== undefined) {
      this.#wide[i] = id;
    } else if (id >= 0 && id < LOW) {
      this.#lo[i] = id;
      if (this.#hi !== undefined) this.#hi[i] = 0;
    } else if (id > 0 && id < HIGH && Number.isInteger(id)) {
      this.#hi ??= new Uint8Array(this.#lo.length);
      this.#lo[i] = id & 0xffff;
      this.#hi[i] = id >>> 16;
    } else {
      this.#widen();
      this.#wide![i] = id;
    }
  }

  /** A chunk of `capacity` slots holding this one's first `used` ids (used <= both capacities). */
  copy(capacity: number, used: number): IdChunk {
    const out = new IdChunk(0);
    if (this.#wide !== undefined) {
      out.#wide = new Int32Array(capacity);
      out.#wide.set(this.#wide.subarray(0, used));
      return out;
    }
    out.#lo = new Uint16Array(capacity);
    out.#lo.set(this.#lo.subarray(0, used));
    if (this.#hi !== undefined) {
      out.#hi = new Uint8Array(capacity);
      out.#hi.set(this.#hi.subarray(0, used));
    }
    return out;
  }

  /** Writes ids 0..n-1 to out[p..p+n-1]. */
  readInto(out: number[] | Int32Array, p: number, n: number): void {
    const wide = this.#wide;
    if (wide !== undefined) {
      for (let i = 0; i < n; i++) out[p + i] = wide[i]!;
      return;
    }
    const lo = this.#lo;
    const hi = this.#hi;
    if (hi === undefined) for (let i = 0; i < n; i++) out[p + i] = lo[i]!;
    else for (let i = 0; i < n; i++) out[p + i] = lo[i]! | (hi[i]! << 16);
  }

  /** The first i in [from, to) where id i differs from ids[i + offset], else `to`. */
  mismatch(ids: ArrayLike<number>, offset: number, from: number, to: number): number {
    const wide = this.#wide;
    if (wide !== undefined) {
      for (let i = from; i < to; i++) if (wide[i] !== ids[i + offset]) return i;
      return to;
    }
    const lo = this.#lo;
    const hi = this.#hi;
    if (hi === undefined) {
      for (let i = from; i < to; i++) if (lo[i] !== ids[i + offset]) return i;
    } else {
      for (let i = from; i < to; i++) if ((lo[i]! | (hi[i]! << 16)) !== ids[i + offset]) return i;
    }
    return to;
  }

  #widen(): void {
    const wide = new Int32Array(this.#lo.length);
    for (let i = 0; i < wide.length; i++) wide[i] = this.get(i);
    this.#wide = wide;
    this.#lo = new Uint16Array(0);
    this.#hi = undefined;
  }
}
