// Where a connecting channel's socket reads land. Node's default read path allocates a
// fresh 64 KiB buffer for every read, then copies the bytes read into a second, zeroed
// one of the right size: on a channel that relays hundreds of MiB (a records GET), that
// is two extra passes over every byte, first-touch page faults, and external memory that
// keeps the GC busy. With `onread`, the kernel reads straight into a slab taken from a
// pool; consecutive reads fill the same slab, and body bytes are handed on as views of it.
//
// The pool is buffers/buffer-pool.ts; this file owns only the transport's bookkeeping on
// top of it: which slab reads go into, and how many views of each slab are still held. A
// slab goes back to the pool only when every view handed out of it has been released
// (each view carries a release under WRITTEN, buffers/release.ts). A consumer that never
// releases is still safe: its slab is simply never reused and the GC frees it once the
// last view is gone.

import { BufferPool } from "../buffers/buffer-pool.ts";
import { releasable, type Releasable } from "../buffers/release.ts";

const SLAB_BYTES = 256 * 1024;
const MIN_READ_BYTES = 64 * 1024; // a slab with less room left takes no more reads

/** One pooled buffer while reads go into it and views of it are out. */
class Slab {
  used = 0;
  held = 0; // views handed out and not yet released
  current = true; // still the slab reads go into

  constructor(readonly buffer: Buffer) {}
}

/**
 * The process's slabs, shared by every channel: what one stream's unread window held is
 * what the next stream reads into. During a burst (many records GETs at once) it keeps
 * up to 64 MiB, so the burst's slabs are reused rather than freed and faulted in again;
 * a quiet process shrinks back to 8 MiB. A recycled slab's bytes stay as they are until
 * a later read overwrites them.
 */
export const readSlabPool = new BufferPool(SLAB_BYTES, { keepBytes: 64 * 2 ** 20, idleBytes: 8 * 2 ** 20 });

/** One socket's reads: the slab being filled, and the views handed out of it. */
export class ReadSlabs {
  readonly #pool: BufferPool;
  readonly #minRead: number;
  #current: Slab | undefined;
  #last: Slab | undefined; // the slab of the read being decoded
  #sink: ((bytes: Buffer) => void) | undefined;
  #early: Buffer[] = []; // copies of reads that came before a sink was attached

  constructor(pool: BufferPool = readSlabPool) {
    this.#pool = pool;
    this.#minRead = Math.min(MIN_READ_BYTES, pool.bufferBytes);
  }

  /** The `onread.buffer` function: the free tail of the current slab. */
  readonly #next = (): Buffer => {
    const slab = (this.#current ??= new Slab(this.#pool.take()));
    return slab.buffer.subarray(slab.used);
  };

  /** The `onread` option for `net.createConnection`. */
  onread(): { buffer: () => Buffer; callback: (n: number) => boolean } {
    return {
      buffer: this.#next,
      callback: (n) => {
        const bytes = this.#filled(n);
        try {
          if (this.#sink !== undefined) this.#sink(bytes);
          else this.#early.push(Buffer.from(bytes));
        } finally {
          this.#settle();
        }
        return true;
      },
    };
  }

  /** Where reads go from now on; reads that came earlier are delivered first (as copies). */
  attach(sink: (bytes: Buffer) => void): void {
    this.#sink = sink;
    const early = this.#early;
    this.#early = [];
    for (const bytes of early) sink(bytes);
  }

  /** Accounts for `n` bytes just read into the buffer `#next()` gave; returns them. */
  #filled(n: number): Buffer {
    const slab = this.#current!;
    const bytes = slab.buffer.subarray(slab.used, slab.used + n);
    slab.used += n;
    this.#last = slab;
    return bytes;
  }

  /**
   * Call once the latest read has been decoded (views of it held or dropped): a slab
   * with too little room left stops taking reads, and is reused once nothing holds it.
   * Not before: a view released during decoding must not free the slab being decoded.
   */
  #settle(): void {
    const slab = this.#last;
    this.#last = undefined;
    if (slab === undefined || slab !== this.#current || slab.buffer.length - slab.used >= this.#minRead) return;
    slab.current = false;
    this.#current = undefined;
    if (slab.held === 0) this.#pool.give(slab.buffer);
  }

  /**
   * Marks `view` (a part of the latest read) as handed on: it carries a release under
   * WRITTEN, and its slab is not reused before that release. A view of an early copy
   * (see attach) is not slab memory and is returned as it is.
   */
  hold(view: Buffer): Releasable {
    const slab = this.#last;
    if (slab === undefined) return view;
    slab.held++;
    return releasable(view, () => {
      if (--slab.held === 0 && !slab.current) this.#pool.give(slab.buffer);
    });
  }
}
