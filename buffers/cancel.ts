// Cancellation without an EventTarget. What the request paths need of an AbortSignal is
// `aborted`, `reason` and one-shot "abort" listeners, and an AbortSignal has them; but
// making an AbortController costs ~10 µs on the development VM (an EventTarget, its
// symbols and maps), and a relayed request made one in the router and two in the worker:
// ~30 µs of a proxied request's ~140 µs over the bare topology (docs/benchmark.md). A
// Cancel is a plain object with a listener list, made per request instead.

/** An "abort" listener; a Cancel calls it with no argument (an AbortSignal, with the event). */
type Listener = (event?: unknown) => void;

/** The part of an AbortSignal a request's cancellation uses: an AbortSignal is one, and so is a Cancel. */
export interface CancelSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: Listener, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: Listener): void;
}

/**
 * An AbortController and its signal in one: `abort(reason)` runs every listener once, in
 * the order added, and sets `aborted`. As with an AbortSignal: a listener added after the
 * abort, or removed by another listener during it, never runs; one that throws does not
 * stop the others, and its error is rethrown on a later tick.
 */
export class Cancel implements CancelSignal {
  aborted = false;
  reason: unknown = undefined;
  #listeners: Listener[] | undefined;

  /** Itself: a Cancel is its own signal (so it stands in where an AbortController's `.signal` was). */
  get signal(): CancelSignal {
    return this;
  }

  abort(reason: unknown = new DOMException("This operation was aborted", "AbortError")): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const live = this.#listeners;
    if (live === undefined) return;
    // As with an EventTarget, a listener another one removes during the abort does not run.
    for (const listener of [...live]) {
      if (!live.includes(listener)) continue;
      try {
        listener();
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
    this.#listeners = undefined;
  }

  /** Every listener runs at most once, so `options.once` changes nothing. */
  addEventListener(_type: "abort", listener: Listener, _options?: { once?: boolean }): void {
    if (this.aborted) return;
    const listeners = (this.#listeners ??= []);
    if (!listeners.includes(listener)) listeners.push(listener);
  }

  removeEventListener(_type: "abort", listener: Listener): void {
    const listeners = this.#listeners;
    if (listeners === undefined) return;
    const at = listeners.indexOf(listener);
    if (at !== -1) listeners.splice(at, 1);
  }
}
