// Receive buffers for large engine replies. A reply with routing replay is megabytes that
// a turn holds until its journal entry is written; in fresh buffers, that memory would pile
// up as external memory (see buffer-pool.ts). It goes into reused 1 MiB slabs instead:
// the engine client reads the socket straight into them (space/wrote), or copies chunks
// in (push). The slabs go back to the pool when the turn releases the reply; nothing may
// keep a view of them after that (the caller copies what it sends on).

import { BufferPool, type BufferPoolOptions } from "./buffer-pool.ts";

export const SLAB_BYTES = 1024 * 1024;

/**
 * Slabs for replies. A burst of large replies (eight sessions at 16 MiB each, every one
 * held until its journal entry is written and it is sent on) keeps up to `keepBytes`
 * for reuse; a quiet worker shrinks back to `idleBytes` (see buffer-pool.ts).
 */
export class ReplyBuffers extends BufferPool {
  constructor(options: Partial<BufferPoolOptions> = {}) {
    super(SLAB_BYTES, { keepBytes: 256 * 2 ** 20, idleBytes: 8 * 2 ** 20, ...options });
  }

  collector(): ReplyCollector {
    return new ReplyCollector(this);
  }
}

/** One reply's bytes, copied into slabs as they arrive. */
export class ReplyCollector {
  readonly #pool: BufferPool;
  readonly #slabs: Buffer[] = [];
  #fill = 0; // bytes used in the last slab
  #released = false;

  constructor(pool: BufferPool) {
    this.#pool = pool;
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
    for (const slab of this.#slabs.splice(0)) this.#pool.give(slab);
  }
}
