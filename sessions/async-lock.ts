// A per-session FIFO async lock: holders run one at a time, in the order they asked.
// It guards only in-memory state updates; nobody may hold it across an engine call.
import assert from "node:assert";

/** The tail of every lock nobody holds: an idle session keeps no promise of its own (bench/fork-heap.ts). */
const IDLE: Promise<void> = Promise.resolve();

export class AsyncLock {
  #tail: Promise<void> = IDLE;
  #pending = 0;

  /** Runs `fn` once every earlier holder has released the lock; releases it whatever `fn` does. */
  run<T>(fn: () => T | Promise<T>): Promise<T> {
    this.#pending++;
    const result = this.#tail.then(fn);
    // The next holder waits for this one to settle, never for its outcome.
    this.#tail = result.then(
      () => this.#release(),
      () => this.#release(),
    );
    return result;
  }

  /** Holders running or waiting. */
  get pending(): number {
    return this.#pending;
  }

  #release(): void {
    this.#pending--;
    assert.ok(this.#pending >= 0, "lock released more often than taken");
    // Nobody waits: this holder's settled chain is the tail, and a resolved one is as good.
    if (this.#pending === 0) this.#tail = IDLE;
  }
}
