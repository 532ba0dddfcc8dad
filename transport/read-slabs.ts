// Where a connecting channel's socket reads land. Node's default read path allocates a
// fresh 64 KiB buffer for every read, then copies the bytes read into a second, zeroed
// one of the right size: on a channel that relays hundreds of MiB (a records GET), that
// is two extra passes over every byte, first-touch page faults, and external memory that
// keeps the GC busy. With `onread`, the kernel reads straight into a slab taken from
// here; consecutive reads fill the same slab, and body bytes are handed on as views of it.
//
// A slab goes back to the free list only when every view handed out of it has been
// released (each view carries a release function under WRITTEN, called at most once). A
// consumer that never releases is still safe: its slab is simply never reused and the GC
// frees it once the last view is gone.

import { WRITTEN, type Releasable } from "../buffers/release.ts";

const SLAB_BYTES = 256 * 1024;
const MIN_READ_BYTES = 64 * 1024; // a slab with less room left takes no more reads

class Slab {
  readonly buffer: Buffer;
  used = 0;
  held = 0; // views handed out and not yet released
  current = true; // still the slab reads go into

  constructor(bytes: number) {
    this.buffer = Buffer.allocUnsafeSlow(bytes);
  }
}

/**
 * Free slabs, shared by every channel of a process: what one stream's unread window
 * held is what the next stream reads into. During a burst (many records GETs at once)
 * it keeps up to `keepBytes`, so the burst's slabs are reused rather than freed and
 * faulted in again; free slabs beyond `idleBytes` that went unused for `trimMs` are left
 * to the GC, so a quiet process shrinks back.
 */
export class SlabPool {
  readonly slabBytes: number;
  readonly #keep: number;
  readonly #idleKeep: number;
  readonly #trimMs: number;
  readonly #free: Slab[] = [];
  #allocated = 0;
  #low = 0; // the fewest free slabs since the last trim: that many went unused
  #trimTimer: NodeJS.Timeout | undefined;

  constructor(options: { slabBytes?: number; keepBytes?: number; idleBytes?: number; trimMs?: number } = {}) {
    this.slabBytes = options.slabBytes ?? SLAB_BYTES;
    this.#keep = Math.ceil((options.keepBytes ?? 64 * 2 ** 20) / this.slabBytes);
    this.#idleKeep = Math.min(this.#keep, Math.ceil((options.idleBytes ?? 8 * 2 ** 20) / this.slabBytes));
    this.#trimMs = options.trimMs ?? 2000;
  }

  /** Slabs allocated so far (reuse keeps this flat). */
  get allocated(): number {
    return this.#allocated;
  }

  /** Slabs waiting for reuse. */
  get pooled(): number {
    return this.#free.length;
  }

  take(): Slab {
    const slab = this.#free.pop();
    this.#low = Math.min(this.#low, this.#free.length);
    if (slab !== undefined) {
      slab.used = 0;
      slab.current = true;
      return slab;
    }
    this.#allocated++;
    return new Slab(this.slabBytes);
  }

  give(slab: Slab): void {
    // A recycled slab's bytes stay as they are until a later read overwrites them.
    if (this.#free.length < this.#keep) this.#free.push(slab);
    if (this.#free.length > this.#idleKeep && this.#trimTimer === undefined) {
      this.#low = this.#free.length;
      this.#trimTimer = setTimeout(() => this.#trim(), this.#trimMs);
      this.#trimTimer.unref();
    }
  }

  #trim(): void {
    this.#trimTimer = undefined;
    const unused = Math.min(this.#low, this.#free.length - this.#idleKeep);
    if (unused > 0) this.#free.splice(0, unused); // the oldest first
    if (this.#free.length > this.#idleKeep) {
      this.#low = this.#free.length;
      this.#trimTimer = setTimeout(() => this.#trim(), this.#trimMs);
      this.#trimTimer.unref();
    }
  }
}

/** The process's pool: 256 KiB slabs; up to 64 MiB kept in a burst, 8 MiB when quiet. */
export const readSlabPool = new SlabPool();

/** One socket's reads: the slab being filled, and the views handed out of it. */
export class ReadSlabs {
  readonly #pool: SlabPool;
  readonly #minRead: number;
  #current: Slab | undefined;
  #last: Slab | undefined; // the slab of the read being decoded
  #sink: ((bytes: Buffer) => void) | undefined;
  #early: Buffer[] = []; // copies of reads that came before a sink was attached

  constructor(pool: SlabPool = readSlabPool) {
    this.#pool = pool;
    this.#minRead = Math.min(MIN_READ_BYTES, pool.slabBytes);
  }

  /** The `onread.buffer` function: the free tail of the current slab. */
  readonly #next = (): Buffer => {
    const slab = (this.#current ??= this.#pool.take());
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
    if (slab.held === 0) this.#pool.give(slab);
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
    let released = false;
    (view as Releasable)[WRITTEN] = () => {
      if (released) return;
      released = true;
      if (--slab.held === 0 && !slab.current) this.#pool.give(slab);
    };
    return view as Releasable;
  }
}
