// The body of a streamed engine reply (an SSE stream: `/generate` or `/v1/completions` with
// `stream: true`) as the engine client hands it on: the bytes as they arrive, as an async
// iterable that a reader drains. It holds at most about `highWaterBytes` unread: above it
// the connection stops reading the socket (the engine's socket backs up instead), and once
// the reader has drained it below half, reading goes on. So a slow client behind the
// worker never makes the worker buffer a whole generation.
// A reader that stops early (break, return) abandons the reply: the connection is torn
// down, which is how an engine learns that nobody wants the rest (SGLang and vLLM abort
// a request whose client went away). It never parses the bytes.

/** What the connection reading the socket hears from the stream. */
export interface ReplyStreamHooks {
  /** The reader drained the queue below the low-water mark after it was full: read the socket again. */
  resume(): void;
  /** The reader stopped before the end: drop the connection. */
  abandon(): void;
}

type Waiter = { resolve(r: IteratorResult<Buffer>): void; reject(e: Error): void };

export const DEFAULT_HIGH_WATER_BYTES = 64 * 1024;

export class ReplyStream implements AsyncIterable<Buffer> {
  readonly #hooks: ReplyStreamHooks;
  readonly #highWater: number;
  #queue: Buffer[] = [];
  #bytes = 0;
  #ended = false;
  #error: Error | undefined;
  #waiter: Waiter | undefined;
  #paused = false;
  #iterated = false;
  #settled = false;
  #onSettled: Array<() => void> = [];
  #mapError: (err: Error) => Error = (err) => err;

  constructor(hooks: ReplyStreamHooks, highWaterBytes = DEFAULT_HIGH_WATER_BYTES) {
    this.#hooks = hooks;
    this.#highWater = highWaterBytes;
  }

  /** Unread bytes held. */
  get bufferedBytes(): number {
    return this.#bytes;
  }

  /** True when the connection should stop reading until `resume`. */
  get full(): boolean {
    if (this.#bytes >= this.#highWater) this.#paused = true;
    return this.#paused;
  }

  /** Runs `fn` once the stream has ended, failed or been abandoned (at once if it has). */
  onSettled(fn: () => void): void {
    if (this.#settled) fn();
    else this.#onSettled.push(fn);
  }

  /** Rewrites the error a reader sees (the upstream client maps failures to coded errors). */
  mapErrors(map: (err: Error) => Error): void {
    const inner = this.#mapError;
    this.#mapError = (err) => map(inner(err));
  }

  /** Body bytes, owned by the stream from here on (never a view of a reused buffer). */
  push(piece: Buffer): void {
    if (this.#ended || this.#error !== undefined || piece.length === 0) return;
    const w = this.#waiter;
    if (w !== undefined) {
      this.#waiter = undefined;
      w.resolve({ value: piece, done: false });
      return;
    }
    this.#queue.push(piece);
    this.#bytes += piece.length;
  }

  end(): void {
    if (this.#ended || this.#error !== undefined) return;
    this.#ended = true;
    const w = this.#waiter;
    if (w !== undefined && this.#queue.length === 0) {
      this.#waiter = undefined;
      w.resolve({ value: undefined, done: true });
    }
    this.#settle();
  }

  /** The reply failed: what is queued is still read, then the reader gets `err`. */
  fail(err: Error): void {
    if (this.#ended || this.#error !== undefined) return;
    this.#error = this.#mapError(err);
    const w = this.#waiter;
    if (w !== undefined && this.#queue.length === 0) {
      this.#waiter = undefined;
      w.reject(this.#error);
    }
    this.#settle();
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    if (this.#iterated) throw new TypeError("an engine reply stream can be read only once");
    this.#iterated = true;
    return {
      next: () => this.#next(),
      return: async () => {
        this.#abandon();
        return { value: undefined, done: true };
      },
    };
  }

  /** Nobody will read the rest (also when nobody started to): drop the connection. */
  cancel(): void {
    this.#abandon();
  }

  #next(): Promise<IteratorResult<Buffer>> {
    const piece = this.#queue.shift();
    if (piece !== undefined) {
      this.#bytes -= piece.length;
      if (this.#paused && this.#bytes * 2 < this.#highWater) {
        this.#paused = false;
        if (!this.#settled) this.#hooks.resume();
      }
      return Promise.resolve({ value: piece, done: false });
    }
    if (this.#error !== undefined) return Promise.reject(this.#error);
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  #abandon(): void {
    const open = !this.#ended && this.#error === undefined;
    this.#queue = [];
    this.#bytes = 0;
    const w = this.#waiter;
    this.#waiter = undefined;
    w?.resolve({ value: undefined, done: true });
    if (open) {
      this.#ended = true;
      this.#settle();
      this.#hooks.abandon();
    }
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    for (const fn of this.#onSettled.splice(0)) fn();
  }
}
