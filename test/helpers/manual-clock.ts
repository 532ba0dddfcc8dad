// A Clock (buffers/clock.ts) whose time moves only when a test says so: advance(ms) runs
// every timer that falls due, in due order, letting promise callbacks settle between them,
// so a policy that waits seconds or minutes is tested in no real time.
import type { Clock, ClockTimer } from "../../buffers/clock.ts";

interface Timer extends ClockTimer {
  due: number;
  /** Set for an interval: its period. */
  every?: number;
  fn: () => void;
  seq: number;
}

/** Lets pending promise callbacks and I/O callbacks already queued run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Set<Timer>();

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    return this.#add(fn, ms, undefined);
  }

  setInterval(fn: () => void, ms: number): ClockTimer {
    return this.#add(fn, ms, Math.max(1, ms));
  }

  clear(timer: ClockTimer | undefined): void {
    if (timer) this.#timers.delete(timer as Timer);
  }

  /** Timers not yet run or cleared. */
  get pending(): number {
    return this.#timers.size;
  }

  /** Moves time on by `ms`, running each timer as its time comes (intervals as often as they fall due). */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    await settle();
    for (;;) {
      const next = [...this.#timers].filter((t) => t.due <= end).sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!next) break;
      this.#now = Math.max(this.#now, next.due);
      if (next.every === undefined) this.#timers.delete(next);
      else next.due += next.every;
      next.fn();
      await settle();
    }
    this.#now = end;
    await settle();
  }

  #add(fn: () => void, ms: number, every: number | undefined): Timer {
    const timer: Timer = { due: this.#now + Math.max(0, ms), every, fn, seq: this.#seq++, unref: () => timer };
    this.#timers.add(timer);
    return timer;
  }
}
