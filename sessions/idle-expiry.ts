// Idle-session expiry of one shard (--session-idle-ttl-s; docs/operations.md, "Idle
// expiry"): when each session was last used, and a periodic sweep that deletes the ones
// idle longer than the TTL the way a DELETE does, its journal entry saying "expired". A
// session with a turn in flight is never idle, however long its engine call takes; its idle
// time starts when the turn ends. A sweep marks its sessions closing synchronously (the
// registry's delete), so a request that arrives after it hears "expired", never half of a
// session. It holds ids and times; the registry and the record store hold the sessions.
import type { Logger } from "pino";
import { systemClock, type Clock, type ClockTimer } from "../buffers/clock.ts";
import { SessionExpiredError, SessionNotFoundError } from "./errors.ts";
import type { RecordStore } from "./journal/records.ts";
import type { SessionRegistry } from "./registry.ts";

export interface IdleExpiryOptions {
  ttlMs: number;
  registry: SessionRegistry;
  records: RecordStore;
  /** Called once per session expired (a metric). */
  onSessionExpired?: () => void;
  logger?: Logger;
  /** Time and the sweep's timer (default the system clock; tests move a manual one on). */
  clock?: Clock;
}

/** A few sweeps per TTL: a session goes at most a quarter TTL (30 s at most) after it is due. */
export const sweepPeriodMs = (ttlMs: number) => Math.min(30_000, Math.max(100, Math.floor(ttlMs / 4)));

interface Use {
  last: number;
  /** Requests on the session in progress now. */
  busy: number;
}

export class IdleExpiry {
  readonly #ttlMs: number;
  readonly #options: IdleExpiryOptions;
  readonly #log?: Logger;
  readonly #clock: Clock;
  readonly #uses = new Map<string, Use>();
  readonly #timer: ClockTimer;
  #sweeping = false;

  constructor(options: IdleExpiryOptions) {
    this.#ttlMs = options.ttlMs;
    this.#options = options;
    this.#log = options.logger;
    this.#clock = options.clock ?? systemClock;
    this.#timer = this.#clock.setInterval(() => void this.sweep(), sweepPeriodMs(this.#ttlMs));
    this.#timer.unref();
  }

  /** The session was used now (created, read, a turn committed or failed). */
  touch(sessionId: string): void {
    const use = this.#uses.get(sessionId);
    if (use) use.last = this.#now();
    else this.#uses.set(sessionId, { last: this.#now(), busy: 0 });
  }

  /** Runs `op` with the session busy: no sweep expires it meanwhile. Mark it before any await. */
  async busy<T>(sessionId: string, op: () => Promise<T>): Promise<T> {
    this.touch(sessionId);
    const use = this.#uses.get(sessionId)!;
    use.busy++;
    try {
      return await op();
    } finally {
      use.busy--;
      use.last = this.#now();
    }
  }

  /** The session is gone (deleted): stop tracking it. */
  forget(sessionId: string): void {
    this.#uses.delete(sessionId);
  }

  /** Expires every session idle longer than the TTL; resolves with how many went. One sweep at a time. */
  async sweep(): Promise<number> {
    if (this.#sweeping) return 0;
    this.#sweeping = true;
    try {
      const due = this.#now() - this.#ttlMs;
      const idle = [...this.#uses].filter(([, use]) => use.busy === 0 && use.last < due).map(([id]) => id);
      // Each expire marks its session closing before its first await: all of them, at once.
      const results = await Promise.allSettled(idle.map((id) => this.#expire(id)));
      let expired = 0;
      results.forEach((result, i) => {
        if (result.status === "fulfilled") {
          expired++;
          this.#uses.delete(idle[i]!);
        } else this.#log?.warn({ sessionId: idle[i], err: result.reason }, "idle expiry failed; will retry");
      });
      return expired;
    } finally {
      this.#sweeping = false;
    }
  }

  close(): void {
    this.#clock.clear(this.#timer);
  }

  #now(): number {
    return this.#clock.now();
  }

  /** Deletes one idle session like a DELETE; a rejection (a failed journal write) is retried next sweep. */
  async #expire(sessionId: string): Promise<void> {
    const { registry, records } = this.#options;
    try {
      await registry.delete(sessionId, (t) => records.drop(t.id, "expired"), "expired");
    } catch (err) {
      // Deleted by its client meanwhile, or already expiring.
      if (err instanceof SessionNotFoundError || err instanceof SessionExpiredError) return;
      throw err;
    }
    this.#log?.info({ sessionId }, "session expired (idle)");
    this.#options.onSessionExpired?.();
  }
}
