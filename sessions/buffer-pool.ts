// Fixed-size buffers kept for reuse. Fresh buffers count as V8 external memory, and every
// 64 MiB of it forces a full GC of the worker's heap (tokenizer tables included); a
// buffer taken from here was allocated once. Whoever takes a buffer gives it back only
// when nothing can read or write it any more.

export class BufferPool {
  readonly bufferBytes: number;
  readonly #free: Buffer[] = [];
  readonly #keep: number;

  /** `keep`: buffers kept for reuse at most (the rest are left to the GC). */
  constructor(bufferBytes: number, keep: number) {
    this.bufferBytes = bufferBytes;
    this.#keep = keep;
  }

  /** Buffers waiting for reuse. */
  get pooled(): number {
    return this.#free.length;
  }

  take(): Buffer {
    return this.#free.pop() ?? Buffer.allocUnsafeSlow(this.bufferBytes);
  }

  give(buffer: Buffer): void {
    if (this.#free.length < this.#keep) this.#free.push(buffer);
  }
}
