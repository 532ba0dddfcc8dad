// The receiving end of one body: a queue of Buffers (slices of socket chunks) that a
// consumer drains as an async iterable. It reports consumed bytes so the channel can
// grant the sender more window, and tells the channel when it is settled (ended,
// failed, or abandoned by a consumer that stopped iterating). It never concatenates.
// Pieces may be views of pooled read slabs (buffers/release.ts): a piece handed to the consumer
// is the consumer's to release; a piece this queue drops unread is released here.

import { release } from "../buffers/release.ts";

export interface IncomingBody extends AsyncIterable<Buffer> {
  /** All chunks, in order (no concatenation). */
  collect(): Promise<Buffer[]>;
  /** false when the whole body came in one frame. */
  readonly streaming: boolean;
}

/** How a body reports to its channel; one object per channel, shared by its bodies. */
export interface BodyHooks {
  /** The consumer took `bytes` off the queue (window refill). */
  consumed(body: BodyQueue, bytes: number): void;
  /** The consumer stopped before the end (break / return): the sender should stop. */
  abandoned(body: BodyQueue): void;
  /** Runs once when the body is ended, failed or abandoned. */
  settled(body: BodyQueue): void;
}

type Waiter = { resolve(r: IteratorResult<Buffer>): void; reject(e: Error): void };

export class BodyQueue implements IncomingBody {
  readonly streaming: boolean;
  readonly id: number;
  /** Consumed bytes not yet granted back to the sender (kept by inbound-bodies.ts). */
  unacked = 0;
  #queue: Buffer[] = [];
  #head = 0;
  #bytes = 0;
  #ended = false;
  #error: Error | undefined;
  #settled = false;
  #iterated = false;
  #waiter: Waiter | undefined;
  readonly #hooks: BodyHooks;

  constructor(id: number, streaming: boolean, hooks: BodyHooks) {
    this.id = id;
    this.streaming = streaming;
    this.#hooks = hooks;
  }

  /** Unconsumed bytes held in memory. */
  get bufferedBytes(): number {
    return this.#bytes;
  }

  /** True once no more data will arrive (ended, failed, or abandoned). */
  get finished(): boolean {
    return this.#ended || this.#error !== undefined;
  }

  push(piece: Buffer): void {
    if (this.finished || piece.length === 0) return release(piece);
    const w = this.#waiter;
    if (w !== undefined) {
      this.#waiter = undefined;
      this.#hooks.consumed(this, piece.length);
      w.resolve({ value: piece, done: false });
      return;
    }
    this.#queue.push(piece);
    this.#bytes += piece.length;
  }

  end(): void {
    if (this.finished) return;
    this.#ended = true;
    const w = this.#waiter;
    if (w !== undefined && this.#head === this.#queue.length) {
      this.#waiter = undefined;
      w.resolve({ value: undefined, done: true });
    }
    this.#settle();
  }

  /** Fails the body: queued data is dropped and the consumer's next read throws `err`. */
  fail(err: Error): void {
    if (this.finished) return;
    this.#error = err;
    this.#drop();
    const w = this.#waiter;
    if (w !== undefined) {
      this.#waiter = undefined;
      w.reject(err);
    }
    this.#settle();
  }

  /** Nobody will read it: drop what is queued and tell the sender to stop. */
  discard(): void {
    if (this.#settled) {
      this.#drop();
      return;
    }
    this.#abandon();
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    if (this.#iterated) throw new TypeError("a transport body can be iterated only once");
    this.#iterated = true;
    return {
      next: () => this.#next(),
      return: async () => {
        this.#abandon();
        return { value: undefined, done: true };
      },
    };
  }

  async collect(): Promise<Buffer[]> {
    // Fast path: the whole body is already here (the common one-frame case).
    if (this.#ended && !this.#iterated && this.#error === undefined) {
      this.#iterated = true;
      const out = this.#head === 0 ? this.#queue : this.#queue.slice(this.#head);
      for (const b of out) this.#hooks.consumed(this, b.length);
      this.#queue = []; // handed over: the consumer's to release, not dropped
      this.#head = 0;
      this.#bytes = 0;
      return out;
    }
    const out: Buffer[] = [];
    for await (const b of this) out.push(b);
    return out;
  }

  #next(): Promise<IteratorResult<Buffer>> {
    if (this.#head < this.#queue.length) {
      const b = this.#queue[this.#head]!;
      this.#queue[this.#head++] = undefined as unknown as Buffer;
      if (this.#head === this.#queue.length) {
        this.#queue = [];
        this.#head = 0;
      }
      this.#bytes -= b.length;
      this.#hooks.consumed(this, b.length);
      return Promise.resolve({ value: b, done: false });
    }
    if (this.#error !== undefined) return Promise.reject(this.#error);
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  #abandon(): void {
    const wasOpen = !this.finished;
    this.#drop();
    const w = this.#waiter;
    if (w !== undefined) {
      this.#waiter = undefined;
      w.resolve({ value: undefined, done: true });
    }
    if (wasOpen) {
      this.#ended = true; // later pieces are ignored
      this.#hooks.abandoned(this);
    }
    this.#settle();
  }

  #drop(): void {
    for (let i = this.#head; i < this.#queue.length; i++) release(this.#queue[i]!);
    this.#queue = [];
    this.#head = 0;
    this.#bytes = 0;
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#hooks.settled(this);
  }
}
