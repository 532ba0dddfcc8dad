// Time as a dependency: the few places that wait on the wall clock for a policy (idle
// expiry's sweep, the rollout door's hold timeout, the records streamer's restart delay)
// take a Clock, so a test can move time on instead of waiting it out. The system clock is
// Node's timers and Date.now(); tests pass their own (test/helpers/manual-clock.ts).

/** A timer a Clock made; only the same Clock clears it. */
export interface ClockTimer {
  /** Node's unref(): the timer does not keep the process up. */
  unref(): unknown;
}

export interface Clock {
  /** Milliseconds since the epoch (Date.now()). */
  now(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  setInterval(fn: () => void, ms: number): ClockTimer;
  /** Clears a timeout or an interval this clock made; undefined is a no-op. */
  clear(timer: ClockTimer | undefined): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  setInterval: (fn, ms) => setInterval(fn, ms),
  clear: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};
