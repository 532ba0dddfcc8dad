// Receive buffers for large engine replies. A reply with routing replay is megabytes that
// a turn holds until its journal entry is written; kept as the socket's own 64 KiB reads,
// those buffers outlive a young-generation GC and pile up as external memory (see
// buffer-pool.ts). Copied into reused 1 MiB slabs instead, the socket's reads die young. The slabs go back to the pool when the turn releases the reply; nothing may
// keep a view of them after that (the caller copies what it sends on).

import { BufferPool } from "./buffer-pool.ts";

export const SLAB_BYTES = 1024 * 1024;

/** Slabs for replies; `keep` slabs are kept for reuse at most. */
export class ReplyBuffers extends BufferPool {
  constructor(keep = 32) {
    super(SLAB_BYTES, keep);
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
    if (this.#released) return;
    let at = 0;
    while (at < chunk.length) {
      let slab = this.#slabs[this.#slabs.length - 1];
      if (slab === undefined || this.#fill === slab.length) {
        slab = this.#pool.take();
        this.#slabs.push(slab);
        this.#fill = 0;
      }
      const n = Math.min(slab.length - this.#fill, chunk.length - at);
      chunk.copy(slab, this.#fill, at, at + n);
      this.#fill += n;
      at += n;
    }
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
