// The rollout door (docs/rl-loop.md): every chat turn passes it on its way to a worker.
// While running, a turn passes at once and is stamped, when it is sent, with the weight
// version current then. While paused, turns wait here in arrival order, each at most
// `holdTimeoutMs`, and resume lets them through in that order. The door counts the turns
// in flight (passed, not yet answered by their worker), so a pause can drain them, have
// them aborted, or keep them. A turn that passed but was not sent yet when a pause began
// (its shard was restarting) goes back to the front of the queue: nothing is sent while
// paused. It never parses a body and never talks to a worker: aborting sent turns is the
// caller's `abort`, telling workers the new state is `tell`, and reporting state changes to
// the host is `report`.
import { RequestAbortedError, type Channel } from "../../transport/index.ts";
import type { RolloutEvent, RolloutState } from "../../actors/index.ts";
import { HoldTimeoutError } from "./errors.ts";
import type { CancelSignal } from "../../buffers/cancel.ts";
import { systemClock, type Clock } from "../../buffers/clock.ts";

export type InFlightMode = "drain" | "abort" | "keep";
export const IN_FLIGHT_MODES: readonly InFlightMode[] = ["drain", "abort", "keep"];

/** What GET /admin/rollout answers. */
export interface RolloutStatus {
  state: "running" | "paused";
  weight_version: string | null;
  /** Turns waiting at the door. */
  held: number;
  /** Turns that passed the door and have no answer from their worker yet. */
  in_flight: number;
}

/** What the door tells the metrics (router-metrics.ts); must not throw. */
export interface DoorObserver {
  /** A held turn left the queue: let through by resume, timed out, or its client went away. */
  held(outcome: "released" | "timeout" | "gone", seconds: number): void;
  /** A pause ended (resume): how long the door was closed. */
  paused(seconds: number): void;
  /** A pause request was answered: how long it waited (drain: for the in-flight turns). */
  pauseAnswered(mode: InFlightMode, seconds: number): void;
}

export interface DoorOptions {
  holdTimeoutMs: number;
  /** The state to start in (a restarted router gets the host's copy). */
  initial?: RolloutState;
  /** Tells the host; resolves once the report is on its way (it survives this process then). */
  report?: (state: RolloutState, event?: RolloutEvent) => Promise<void>;
  observer?: DoorObserver;
  /** The clock hold timeouts run on (default the system clock; tests move a manual one on). */
  clock?: Clock;
}

type TurnState = "held" | "passed" | "sent" | "done";

/** One chat turn at the door, from arrival to its worker's answer. */
export class DoorTurn {
  state: TurnState = "passed";
  /** Set when sent: the channel it went on (an abort goes there). */
  channel: Channel | undefined;
  /** The weight version it was sent under. */
  weightVersion: string | null = null;
  heldSince = 0;
  /** Clears its hold timer (the door sets it while the turn is held). */
  stopTimer: () => void = () => undefined;
  #ready: Promise<void> = Promise.resolve();
  #settle: { resolve(): void; reject(err: Error): void } | undefined;
  readonly #done: { promise: Promise<void>; resolve(): void };

  constructor(readonly shard: number) {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.#done = { promise, resolve };
  }

  /** Resolves once the turn may be sent; rejects with HoldTimeoutError, or RequestAbortedError when its client left. */
  ready(): Promise<void> {
    return this.#ready;
  }

  /** Resolves once the turn's worker answered (or it left the door without being sent). */
  get done(): Promise<void> {
    return this.#done.promise;
  }

  hold(): void {
    this.state = "held";
    this.heldSince = performance.now();
    this.#ready = new Promise<void>((resolve, reject) => (this.#settle = { resolve, reject }));
    this.#ready.catch(() => undefined); // the relay awaits it; an unawaited rejection is not a crash
  }

  pass(): void {
    this.stopTimer();
    this.state = "passed";
    this.#settle?.resolve();
    this.#settle = undefined;
  }

  refuse(err: Error): void {
    this.stopTimer();
    this.#settle?.reject(err);
    this.#settle = undefined;
    this.finish();
  }

  finish(): void {
    this.state = "done";
    this.#done.resolve();
  }
}

export class RolloutDoor {
  readonly #holdTimeoutMs: number;
  readonly #report: DoorOptions["report"];
  readonly #clock: Clock;
  #rollout: RolloutState;
  /** Held turns, oldest first. */
  #queue: DoorTurn[] = [];
  /** Turns that passed and are not done, in the order they passed. */
  readonly #inFlight = new Set<DoorTurn>();
  #pausedSince: number | undefined;
  observer: DoorObserver | undefined;

  constructor(options: DoorOptions) {
    this.#holdTimeoutMs = options.holdTimeoutMs;
    this.#report = options.report;
    this.#clock = options.clock ?? systemClock;
    this.observer = options.observer;
    this.#rollout = options.initial
      ? { ...options.initial }
      : { state: "running", weight_version: null, mode: null, paused_at: null };
    // A pause that began before this process (a router restart) still counts from its start.
    if (this.#rollout.state === "paused")
      this.#pausedSince = performance.now() - Math.max(0, Date.now() - (this.#rollout.paused_at ?? Date.now()));
  }

  get holdTimeoutMs(): number {
    return this.#holdTimeoutMs;
  }

  get weightVersion(): string | null {
    return this.#rollout.weight_version;
  }

  status(): RolloutStatus {
    return {
      state: this.#rollout.state,
      weight_version: this.#rollout.weight_version,
      held: this.#queue.length,
      in_flight: this.#inFlight.size,
    };
  }

  /** A chat turn arrives for `shard`; await `turn.ready()` before sending it. */
  enter(shard: number, signal: CancelSignal): DoorTurn {
    const turn = new DoorTurn(shard);
    if (this.#rollout.state === "running" && this.#queue.length === 0) this.#inFlight.add(turn);
    else this.#enqueue([turn], false);
    signal.addEventListener("abort", () => this.#gone(turn), { once: true });
    return turn;
  }

  /** The turn goes out on `channel` now; returns the weight version to stamp it with. */
  send(turn: DoorTurn, channel: Channel): string | null {
    turn.state = "sent";
    turn.channel = channel;
    turn.weightVersion = this.#rollout.weight_version;
    return turn.weightVersion;
  }

  /** The turn's worker answered, or the turn failed before it was sent. Idempotent. */
  finish(turn: DoorTurn): void {
    if (turn.state === "done") return;
    if (turn.state === "held") return this.#gone(turn);
    this.#inFlight.delete(turn);
    turn.finish();
  }

  /**
   * Closes the door. Turns that passed but are not sent yet go back to the queue. Then,
   * by `mode`: drain waits for every sent turn's answer; abort has `abort` tell their
   * workers and waits for the (prompt) answers; keep answers at once.
   */
  async pause(
    mode: InFlightMode,
    abort: (channels: Channel[]) => Promise<void>,
    tell?: () => Promise<void>,
  ): Promise<Record<string, unknown>> {
    const started = performance.now();
    if (this.#rollout.state === "running") {
      this.#pausedSince = started;
      this.#rollout = { ...this.#rollout, state: "paused", paused_at: Date.now() };
    }
    this.#rollout.mode = mode;
    const recalled = [...this.#inFlight].filter((t) => t.state === "passed");
    for (const turn of recalled) this.#inFlight.delete(turn);
    this.#enqueue(recalled, true);
    const sent = [...this.#inFlight];
    const reported = this.#report?.(this.rollout());
    // The workers hear of it before the pause answers (the engine's own abort comes after).
    await tell?.();
    if (mode === "abort") {
      const channels = new Set(sent.map((t) => t.channel).filter((c): c is Channel => c !== undefined));
      await abort([...channels]);
    }
    if (mode !== "keep") await Promise.all(sent.map((t) => t.done));
    await reported;
    const waitMs = Math.round(performance.now() - started);
    this.observer?.pauseAnswered(mode, waitMs / 1000);
    const counts = { drain: "drained", abort: "aborted", keep: "kept" } as const;
    const detail = {
      mode,
      weight_version: this.#rollout.weight_version,
      [counts[mode]]: sent.length,
      held: this.#queue.length,
      wait_ms: waitMs,
    };
    // A resume that came in while this pause waited has the last word.
    if (this.#rollout.state === "paused") await this.#report?.(this.rollout(), { kind: "paused", detail });
    return detail;
  }

  /** Sets the weight version and opens the door: held turns go through in arrival order. */
  async resume(weightVersion: string): Promise<Record<string, unknown>> {
    const previous = this.#rollout.weight_version;
    const wasPaused = this.#rollout.state === "paused";
    const pausedMs = this.#pausedSince === undefined ? 0 : Math.round(performance.now() - this.#pausedSince);
    this.#rollout = { state: "running", weight_version: weightVersion, mode: null, paused_at: null };
    this.#pausedSince = undefined;
    const released = this.#queue;
    this.#queue = [];
    const now = performance.now();
    for (const turn of released) {
      this.#inFlight.add(turn);
      turn.pass();
      this.observer?.held("released", (now - turn.heldSince) / 1000);
    }
    if (wasPaused) this.observer?.paused(pausedMs / 1000);
    const detail = {
      weight_version: weightVersion,
      previous_weight_version: previous,
      released: released.length,
      paused_ms: wasPaused ? pausedMs : 0,
    };
    await this.#report?.(this.rollout(), { kind: "resumed", detail });
    return detail;
  }

  rollout(): RolloutState {
    return { ...this.#rollout };
  }

  #enqueue(turns: DoorTurn[], atFront: boolean): void {
    for (const turn of turns) {
      turn.hold();
      const timer = this.#clock.setTimeout(() => this.#timeout(turn), this.#holdTimeoutMs);
      turn.stopTimer = () => this.#clock.clear(timer);
    }
    this.#queue = atFront ? [...turns, ...this.#queue] : [...this.#queue, ...turns];
  }

  #timeout(turn: DoorTurn): void {
    if (!this.#dequeue(turn)) return;
    this.observer?.held("timeout", (performance.now() - turn.heldSince) / 1000);
    turn.refuse(new HoldTimeoutError(this.#holdTimeoutMs));
  }

  /** Its client went away: a held turn leaves the queue; an in-flight one is finished by its relay. */
  #gone(turn: DoorTurn): void {
    if (!this.#dequeue(turn)) return;
    this.observer?.held("gone", (performance.now() - turn.heldSince) / 1000);
    turn.refuse(new RequestAbortedError("the client went away while its turn was held"));
  }

  #dequeue(turn: DoorTurn): boolean {
    if (turn.state !== "held") return false;
    const at = this.#queue.indexOf(turn);
    if (at >= 0) this.#queue.splice(at, 1);
    return true;
  }
}
