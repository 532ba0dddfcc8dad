// Restart intensity and backoff for one supervised child (nact has neither).
// OTP-style intensity: more than `maxRestarts` restarts within a sliding `windowMs`
// escalates. Backoff doubles from `baseBackoffMs` to `maxBackoffMs` with jitter and
// starts over once a child has stayed up `stableAfterMs`; a child that dies within
// `unstableWithinMs` of ready (or before ready) is reported as unstable (as PM2 does).
// Lives outside the actor's state on purpose: nact's `reset` wipes actor state,
// and the restart history must survive the resets it decides.

export interface RestartPolicyOptions {
  maxRestarts: number;
  windowMs: number;
  baseBackoffMs: number;
  maxBackoffMs: number;
  stableAfterMs: number;
  unstableWithinMs: number;
  /** Jitter as a fraction of the backoff, e.g. 0.2 = ±20 %. */
  jitter: number;
}

export const defaultRestartPolicy: RestartPolicyOptions = {
  maxRestarts: 3,
  windowMs: 60_000,
  baseBackoffMs: 250,
  maxBackoffMs: 10_000,
  stableAfterMs: 30_000,
  unstableWithinMs: 1_000,
  jitter: 0.2,
};

export type ExitDecision =
  { action: "restart"; attempt: number; backoffMs: number; unstable: boolean } | { action: "escalate"; reason: string };

export class RestartPolicy {
  readonly options: RestartPolicyOptions;
  #restartTimes: number[] = [];
  #attempt = 0;
  #readyAt: number | undefined;
  #total = 0;
  #pendingBackoffMs = 0;

  constructor(options: Partial<RestartPolicyOptions> = {}) {
    this.options = { ...defaultRestartPolicy, ...options };
  }

  /** Restarts decided so far over the child's life. */
  get restarts(): number {
    return this.#total;
  }

  /** The delay before the next spawn: 0 for the first start, the backoff after a crash. */
  takeSpawnDelay(): number {
    const delay = this.#pendingBackoffMs;
    this.#pendingBackoffMs = 0;
    return delay;
  }

  noteReady(now: number): void {
    this.#readyAt = now;
  }

  /** Decide what an unexpected exit at `now` leads to. */
  noteExit(now: number, random: () => number = Math.random): ExitDecision {
    const { maxRestarts, windowMs, baseBackoffMs, maxBackoffMs, stableAfterMs, unstableWithinMs, jitter } =
      this.options;
    const uptime = this.#readyAt === undefined ? undefined : now - this.#readyAt;
    this.#readyAt = undefined;
    this.#restartTimes = this.#restartTimes.filter((t) => now - t < windowMs);
    if (this.#restartTimes.length + 1 > maxRestarts) {
      return {
        action: "escalate",
        reason: `more than ${maxRestarts} restart(s) within ${windowMs} ms`,
      };
    }
    this.#restartTimes.push(now);
    this.#total += 1;
    if (uptime !== undefined && uptime >= stableAfterMs) this.#attempt = 0;
    this.#attempt += 1;
    const exp = Math.min(maxBackoffMs, baseBackoffMs * 2 ** (this.#attempt - 1));
    const backoffMs = Math.max(0, Math.round(exp * (1 + jitter * (2 * random() - 1))));
    this.#pendingBackoffMs = backoffMs;
    return {
      action: "restart",
      attempt: this.#attempt,
      backoffMs,
      unstable: uptime === undefined || uptime < unstableWithinMs,
    };
  }
}
