// Fixed-size buffers kept for reuse: the one pool of the project, behind the engine's reply
// buffers, the journal's record-stream reads and the transport's read slabs. Fresh buffers
// count as V8 external memory, and every 64 MiB of it starts a full GC of the process's
// heap (tokenizer tables included; docs/benchmark.md has what that costs); a buffer taken
// from here was allocated once. Whoever takes a buffer gives it back only when nothing can
// read or write it any more (buffers handed to others carry a release: release.ts).
//
// A burst (eight sessions each holding a 16 MiB routing-replay reply) needs far more
// buffers than a quiet process should keep, so the pool keeps up to `keepBytes` while
// busy, and buffers beyond `idleBytes` that stayed free for a whole `trimMs` interval are
// dropped (to the GC), so the process shrinks back once the burst is over.

export interface BufferPoolOptions {
  /** Free buffers kept at most, in bytes (rounded up to whole buffers). */
  keepBytes: number;
  /** What a quiet pool shrinks back to, in bytes (default: none). */
  idleBytes?: number;
  /** How long a free buffer must go unused before it is dropped (default 2 s). */
  trimMs?: number;
}

export class BufferPool {
  readonly bufferBytes: number;
  readonly #free: Buffer[] = [];
  readonly #keep: number;
  readonly #idle: number;
  readonly #trimMs: number;
  #allocated = 0;
  #untouched = 0; // free buffers at the bottom of the stack not taken since the last check
  #timer: NodeJS.Timeout | undefined;

  constructor(bufferBytes: number, options: BufferPoolOptions) {
    this.bufferBytes = bufferBytes;
    this.#keep = Math.ceil(options.keepBytes / bufferBytes);
    this.#idle = Math.min(this.#keep, Math.floor((options.idleBytes ?? 0) / bufferBytes));
    this.#trimMs = options.trimMs ?? 2000;
  }

  /** Buffers waiting for reuse. */
  get pooled(): number {
    return this.#free.length;
  }

  /** Buffers allocated so far (reuse keeps this flat). */
  get allocated(): number {
    return this.#allocated;
  }

  take(): Buffer {
    const buffer = this.#free.pop();
    if (this.#untouched > this.#free.length) this.#untouched = this.#free.length;
    if (buffer !== undefined) return buffer;
    this.#allocated++;
    return Buffer.allocUnsafeSlow(this.bufferBytes);
  }

  give(buffer: Buffer): void {
    if (this.#free.length >= this.#keep) return; // left to the GC
    this.#free.push(buffer);
    if (this.#free.length > this.#idle && this.#timer === undefined) this.#arm();
  }

  #arm(): void {
    this.#untouched = this.#free.length;
    this.#timer = setTimeout(this.#check, this.#trimMs);
    this.#timer.unref();
  }

  // The stack's bottom `#untouched` buffers were free the whole interval: drop those above
  // the idle size (the bottom of a stack is what a burst reached last and reuses least).
  #check = (): void => {
    this.#timer = undefined;
    const drop = Math.min(this.#untouched, this.#free.length - this.#idle);
    if (drop > 0) this.#free.splice(0, drop);
    if (this.#free.length > this.#idle) this.#arm();
  };
}
