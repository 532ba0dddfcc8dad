// One chunk of a session's token store (checkpoints.ts): up to a fixed number of token ids
// in as few bytes as they need (issue 47: bytes per token held). Ids are stored as their
// low 16 bits; a high plane of one byte per id (bits 16-23) is added when the first id of
// 65536 or more is written, and only to that chunk. So a chunk costs 2 bytes per id where
// its ids are below 65536 (a vocabulary of up to 64k ids, or a stretch of text made of a
// large vocabulary's common tokens: byte-pair vocabularies number their merges roughly by
// frequency), 3 where they are below 2^24 (every released vocabulary, ~100k-260k ids),
// and 4 for anything else (an engine's id outside that range is kept as Int32Array kept
// it: the verification and the records see what the engine sent).
//
// A fork's chunk (issue 43) need not copy the ids it shares: a chunk may read its first
// `from` slots through another chunk (its base, which nobody writes any more: every store
// that holds a shared chunk copies it before writing, checkpoints.ts) and own only the
// slots after them. A branch that adds a turn after a fork then owns what it wrote, not a
// copy of the shared chunk's ids (up to 4096 ids, 12 KiB, per branch). Writing below
// `from` (a rollback's tail) first makes the chunk whole again.

const LOW = 0x10000;
const HIGH = 0x1000000;
/** How many chunks a read may pass through (a fork of a fork of …); past it a new chunk is a copy. */
const MAX_DEPTH = 4;

export class IdChunk {
  /** Bits 0-15 of each own id (unused once wide): own slot j is chunk slot `#from + j`. */
  #lo: Uint16Array;
  /** Bits 16-23 of each own id: allocated by the first id that needs them. */
  #hi: Uint8Array | undefined;
  /** Every own id as int32: once an id is negative or needs more than 24 bits. */
  #wide: Int32Array | undefined;
  /** Slots before `#from` are read through `#base` (never written through this chunk). */
  #base: IdChunk | undefined;
  #from = 0;
  /** How many bases a read of slot 0 passes through. */
  #depth = 0;
  /** Shared by forks: never written again (checkpoints.ts writes a new chunk over it instead). */
  #frozen = false;

  constructor(capacity: number) {
    this.#lo = new Uint16Array(capacity);
  }

  /**
   * A chunk of `capacity` slots whose first `shared` ids are `base`'s, read through it rather
   * than copied (`base` must never be written again), the rest its own.
   */
  static over(base: IdChunk, shared: number, capacity: number): IdChunk {
    if (shared === 0) return new IdChunk(capacity);
    // Only the base's base is read: skip the chunk in between.
    if (shared <= base.#from) return IdChunk.over(base.#base!, shared, capacity);
    if (base.#depth >= MAX_DEPTH) return base.#flat(capacity, shared);
    const out = new IdChunk(capacity - shared);
    out.#base = base;
    out.#from = shared;
    out.#depth = base.#depth + 1;
    return out;
  }

  get frozen(): boolean {
    return this.#frozen;
  }
  /** From now on nobody writes into it: a fork shares it. */
  freeze(): void {
    this.#frozen = true;
  }

  /** Id slots (those read through the base included). */
  get capacity(): number {
    return this.#from + this.#ownLength();
  }
  /** Id slots of its own (not read through a base). */
  get ownCapacity(): number {
    return this.#ownLength();
  }
  /** Bytes its own ids take (for tests and sizing). */
  get bytes(): number {
    return this.#wide ? this.#wide.byteLength : this.#lo.byteLength + (this.#hi?.byteLength ?? 0);
  }

  get(i: number): number {
    if (i < this.#from) return this.#base!.get(i);
    const j = i - this.#from;
    if (this.#wide !== undefined) return this.#wide[j]!;
    const hi = this.#hi;
    return hi === undefined ? this.#lo[j]! : this.#lo[j]! | (hi[j]! << 16);
  }

  set(i: number, id: number): void {
    if (i < this.#from) this.#makeWhole();
    const j = i - this.#from;
    if (this.#wide !== undefined) {
      this.#wide[j] = id;
    } else if (id >= 0 && id < LOW) {
      this.#lo[j] = id;
      if (this.#hi !== undefined) this.#hi[j] = 0;
    } else if (id > 0 && id < HIGH && Number.isInteger(id)) {
      this.#hi ??= new Uint8Array(this.#lo.length);
      this.#lo[j] = id & 0xffff;
      this.#hi[j] = id >>> 16;
    } else {
      this.#widen();
      this.#wide![j] = id;
    }
  }

  /** A chunk of `capacity` slots holding this one's first `used` ids (used <= both capacities). */
  copy(capacity: number, used: number): IdChunk {
    const from = this.#from;
    if (used <= from) return IdChunk.over(this.#base!, used, capacity);
    const out = new IdChunk(0);
    out.#base = this.#base;
    out.#from = from;
    out.#depth = this.#depth;
    const size = capacity - from;
    const own = used - from;
    if (this.#wide !== undefined) {
      out.#wide = new Int32Array(size);
      out.#wide.set(this.#wide.subarray(0, own));
      return out;
    }
    out.#lo = new Uint16Array(size);
    out.#lo.set(this.#lo.subarray(0, own));
    if (this.#hi !== undefined) {
      out.#hi = new Uint8Array(size);
      out.#hi.set(this.#hi.subarray(0, own));
    }
    return out;
  }

  /** Writes ids 0..n-1 to out[p..p+n-1]. */
  readInto(out: number[] | Int32Array, p: number, n: number): void {
    const from = Math.min(this.#from, n);
    if (from > 0) this.#base!.readInto(out, p, from);
    const q = p + from;
    const m = n - from;
    const wide = this.#wide;
    if (wide !== undefined) {
      for (let j = 0; j < m; j++) out[q + j] = wide[j]!;
      return;
    }
    const lo = this.#lo;
    const hi = this.#hi;
    if (hi === undefined) for (let j = 0; j < m; j++) out[q + j] = lo[j]!;
    else for (let j = 0; j < m; j++) out[q + j] = lo[j]! | (hi[j]! << 16);
  }

  /** The first i in [from, to) where id i differs from ids[i + offset], else `to`. */
  mismatch(ids: ArrayLike<number>, offset: number, from: number, to: number): number {
    const shared = this.#from;
    if (from < shared) {
      const stop = Math.min(to, shared);
      const end = this.#base!.mismatch(ids, offset, from, stop);
      if (end < stop || stop === to) return end;
      from = stop;
    }
    return shared + this.#ownMismatch(ids, offset + shared, from - shared, to - shared);
  }

  /** mismatch over own slots (j: own slot). */
  #ownMismatch(ids: ArrayLike<number>, offset: number, from: number, to: number): number {
    const wide = this.#wide;
    if (wide !== undefined) {
      for (let j = from; j < to; j++) if (wide[j] !== ids[j + offset]) return j;
      return to;
    }
    const lo = this.#lo;
    const hi = this.#hi;
    if (hi === undefined) {
      for (let j = from; j < to; j++) if (lo[j] !== ids[j + offset]) return j;
    } else {
      for (let j = from; j < to; j++) if ((lo[j]! | (hi[j]! << 16)) !== ids[j + offset]) return j;
    }
    return to;
  }

  #ownLength(): number {
    return this.#wide ? this.#wide.length : this.#lo.length;
  }

  /** A chunk of `capacity` slots of its own holding this one's first `used` ids. */
  #flat(capacity: number, used: number): IdChunk {
    const out = new IdChunk(capacity);
    for (let i = 0; i < used; i++) out.set(i, this.get(i));
    return out;
  }

  /** Copies the base's ids in: every slot its own (before a write below `#from`). */
  #makeWhole(): void {
    const whole = this.#flat(this.capacity, this.capacity);
    this.#lo = whole.#lo;
    this.#hi = whole.#hi;
    this.#wide = whole.#wide;
    this.#base = undefined;
    this.#from = 0;
    this.#depth = 0;
  }

  #widen(): void {
    const wide = new Int32Array(this.#ownLength());
    const from = this.#from;
    for (let j = 0; j < wide.length; j++) wide[j] = this.get(from + j);
    this.#wide = wide;
    this.#lo = new Uint16Array(0);
    this.#hi = undefined;
  }
}
