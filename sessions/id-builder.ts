// A turn's prompt ids while they are put together (prompt-builder.ts): the kept
// checkpoint's ids, less a family's boundary drop, then the boundary and appended ids.
// Held in an Int32Array, not a number[]: a prompt of 80k ids as a JS array is a V8
// large-object allocation of 640 KiB on every turn, whose cost (fresh pages, then the
// GC's) grew with the history and was the largest single item of a long session's turn
// (docs/benchmark.md, "Long sessions"). The store's chunks write their ids into it
// (Checkpoints.copyInto, IdChunk.readInto).

/** Spare slots past the checkpoint: a turn's appended ids (a tool result, the generation prompt) usually fit. */
const APPEND_ROOM = 2048;

export class IdBuilder {
  #buf: Int32Array;
  #length: number;
  /** How many leading ids are still the ones `fill` wrote (a drop below them shortens it). */
  #filled: number;

  /** `fill(out)` writes the first `length` ids into `out` (at least `length` slots). */
  constructor(length: number, fill: (out: Int32Array) => void) {
    this.#buf = new Int32Array(length + APPEND_ROOM);
    this.#length = length;
    this.#filled = length;
    fill(this.#buf);
  }

  get length(): number {
    return this.#length;
  }

  /** The leading ids `fill` wrote and nothing has replaced since. */
  get filled(): number {
    return this.#filled;
  }

  /** The ids so far: a view of the builder's buffer (valid until the next push past its room). */
  get ids(): Int32Array {
    return this.#buf.subarray(0, this.#length);
  }

  /** Leaves out the last `n` ids. */
  drop(n: number): void {
    this.#length = Math.max(0, this.#length - n);
    this.#filled = Math.min(this.#filled, this.#length);
  }

  push(ids: ArrayLike<number>): void {
    const need = this.#length + ids.length;
    if (need > this.#buf.length) {
      const grown = new Int32Array(need + APPEND_ROOM);
      grown.set(this.#buf.subarray(0, this.#length));
      this.#buf = grown;
    }
    for (let i = 0; i < ids.length; i++) this.#buf[this.#length++] = ids[i]!;
  }
}
