// Receive buffers for large engine replies. A reply with routing replay is megabytes that
// a turn holds until its journal entry is written; in fresh buffers, that memory would pile
// up as external memory (see buffer-pool.ts). It goes into reused 1 MiB slabs instead:
// the engine client reads the socket straight into them (space/wrote), or copies chunks
// in (push). The slabs go back to the pool when the turn releases the reply; nothing may
// keep a view of them after that (the caller copies what it sends on).
//
// The replies a worker holds at once are bounded by `budgetBytes`: a reply whose length is
// known up front reserves it, and one that does not fit waits (its socket is not read, so
// the bytes wait in the engine) until earlier replies are released. A reply alone is always
// admitted, however large, so no reply waits forever. Without the bound, every session of
// a shard could hold its largest reply at the same moment, and the worker's peak memory
// would grow with the number of sessions.

import { BufferPool, type BufferPoolOptions } from "../buffers/buffer-pool.ts";

export const SLAB_BYTES = 1024 * 1024;
/** Default bound on the large replies a worker holds at once: two 16 MiB routing-replay replies. */
export const DEFAULT_BUDGET_BYTES = 32 * 1024 * 1024;

const ADMIT = Symbol("admit");
const UNRESERVE = Symbol("unreserve");

/**
 * Slabs for replies, and the admission of replies to them. The pool keeps what the budget
 * (plus replies of unknown length and the few KiB read with a head) can hold at once, and
 * a quiet worker shrinks back to 8 slabs (see buffer-pool.ts).
 */
export class ReplyBuffers extends BufferPool {
  readonly budgetBytes: number;
  #reserved = 0;
  readonly #waiting: ReplyCollector[] = [];

  constructor(options: Partial<BufferPoolOptions> & { budgetBytes?: number } = {}) {
    const budgetBytes = options.budgetBytes ?? DEFAULT_BUDGET_BYTES;
    super(SLAB_BYTES, { keepBytes: budgetBytes + 16 * SLAB_BYTES, idleBytes: 8 * SLAB_BYTES, ...options });
    this.budgetBytes = budgetBytes;
  }

  /** Bytes reserved by admitted replies that are not released yet. */
  get reserved(): number {
    return this.#reserved;
  }

  /** Replies waiting for room. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** A collector for one reply; `expectedBytes` (its content-length, when known) is reserved. */
  collector(expectedBytes = 0): ReplyCollector {
    const c = new ReplyCollector(this, expectedBytes);
    // A reply of unknown length (chunked; the https client) cannot reserve: it goes at once.
    if (expectedBytes === 0 || (this.#waiting.length === 0 && this.#fits(expectedBytes))) this.#admit(c);
    else this.#waiting.push(c);
    return c;
  }

  #fits(bytes: number): boolean {
    return this.#reserved === 0 || this.#reserved + bytes <= this.budgetBytes;
  }

  #admit(c: ReplyCollector): void {
    this.#reserved += c.expectedBytes;
    c[ADMIT]();
  }

  /** @internal a collector's release: its reservation ends, and waiting replies may go. */
  [UNRESERVE](c: ReplyCollector, admitted: boolean): void {
    if (admitted) this.#reserved -= c.expectedBytes;
    else {
      const i = this.#waiting.indexOf(c);
      if (i !== -1) this.#waiting.splice(i, 1);
    }
    while (this.#waiting.length > 0 && this.#fits(this.#waiting[0]!.expectedBytes)) this.#admit(this.#waiting.shift()!);
  }
}

/** One reply's bytes, copied into slabs as they arrive. */
export class ReplyCollector {
  readonly expectedBytes: number;
  readonly #pool: ReplyBuffers;
  readonly #slabs: Buffer[] = [];
  #fill = 0; // bytes used in the last slab
  #released = false;
  #admitted = false;
  #onAdmit: (() => void) | undefined;

  constructor(pool: ReplyBuffers, expectedBytes: number) {
    this.#pool = pool;
    this.expectedBytes = expectedBytes;
  }

  /** The reply fits the worker's budget now: its bytes may be read. */
  get admitted(): boolean {
    return this.#admitted;
  }

  /** Calls `fn` once the reply is admitted (at once if it already is). */
  whenAdmitted(fn: () => void): void {
    if (this.#admitted) fn();
    else this.#onAdmit = fn;
  }

  [ADMIT](): void {
    this.#admitted = true;
    const fn = this.#onAdmit;
    this.#onAdmit = undefined;
    fn?.();
  }

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.#released) {
      const space = this.space(chunk.length - at);
      chunk.copy(space, 0, at, at + space.length);
      this.wrote(space.length);
      at += space.length;
    }
  }

  /**
   * Room for at most `max` more bytes: the free tail of the last slab, or of a new one.
   * A socket can read straight into it; then `wrote(n)` counts what it wrote.
   */
  space(max: number): Buffer {
    let slab = this.#slabs[this.#slabs.length - 1];
    if (slab === undefined || this.#fill === slab.length) {
      slab = this.#pool.take();
      this.#slabs.push(slab);
      this.#fill = 0;
    }
    return slab.subarray(this.#fill, this.#fill + Math.min(max, slab.length - this.#fill));
  }

  /** Counts `n` bytes written into the last `space()`. */
  wrote(n: number): void {
    this.#fill += n;
  }

  /** The reply so far, as views of the slabs (valid until release). */
  parts(): Buffer[] {
    const last = this.#slabs.length - 1;
    return this.#slabs.map((slab, i) => (i === last ? slab.subarray(0, this.#fill) : slab.subarray(0)));
  }

  /** Hands the slabs back; once only. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#onAdmit = undefined;
    for (const slab of this.#slabs.splice(0)) this.#pool.give(slab);
    this.#pool[UNRESERVE](this, this.#admitted);
  }
}
