// The worker's records streamer (docs/architecture.md, "The records streamer"): a helper
// process, one per worker, that writes records bodies read from the journal to clients'
// sockets at a lower CPU priority (a higher nice value), so that while 200 MiB GETs stream
// the kernel gives the cores to chat turns first. The worker keeps the response's journal
// segments pinned and hands over the socket with the body's parts by path
// (RecordStream.portableParts()); the streamer opens the files itself and says when it is
// done, and only then are the segments unpinned.
//
// The worker starts its streamer when a records GET needs one, and again after it dies (the
// responses it was writing are then cut short: the client sees fewer bytes than it was
// promised). A GET that finds none ready waits for the one it starts (or that is
// starting), up to START_WAIT_MS: written by the worker instead, a 270 MiB body would take
// the worker's own event loop, at the worker's priority, from the chat turns it serves
// (issue 47's head-of-line). Only when a streamer dies before it is ready, or is too slow
// to start, does the worker write such a GET itself. With no response in flight for
// idleMs, the streamer is stopped: a Node process holds ~45 MiB resident, which an idle
// worker should not pay (issue 47). It is the worker's own child,
// outside the supervision tree, and never outlives the worker (child-runtime.ts). Should it
// die three times in a row without finishing a response, the worker writes records bodies
// itself from then on, as it does for in-memory ones.
import type { ChildProcess } from "node:child_process";
import type { Socket } from "node:net";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import { isAlive, sendSocketToChild, spawnChild, stopChild } from "../../actors/index.ts";
import type { PortablePart } from "../../sessions/index.ts";
import type { RawHeaders } from "../handoff/raw-http-response.ts";
import { isRecordsStreamed, toWire, type StreamRecords } from "./records-streamer-protocol.ts";
import type { WorkerMetrics } from "./worker-metrics.ts";
import { systemClock, type Clock, type ClockTimer } from "../../buffers/clock.ts";

/** Streamer deaths in a row, with no response finished in between, before the worker stops using one. */
const FAILURES_TO_GIVE_UP = 3;
/** The pause before a dead streamer is started again. */
const RESTART_DELAY_MS = 250;
/** How long a closing worker gives its streamer to end (responses in flight are cut). */
const CLOSE_GRACE_MS = 1_000;
/**
 * The longest a records GET waits for a starting streamer before the worker writes it
 * itself: a streamer is ready in 0.1-0.3 s on an idle machine, but on one loaded 10x
 * over (run from source through tsx, in tests) it took more than 5 s.
 */
const START_WAIT_MS = 30_000;
/** How long a streamer with no response in flight lives on (default of RecordsStreamerOptions.idleMs). */
export const RECORDS_IDLE_MS = 30_000;

export interface RecordsStreamerOptions {
  shard: number;
  /** The streamer's nice value, 0-19. */
  nice: number;
  logger: Logger;
  metrics: WorkerMetrics;
  /** A streamer with no response in flight this long is stopped (default RECORDS_IDLE_MS). */
  idleMs?: number;
  /** The clock of the restart delay and the idle stop (default the system clock; tests move a manual one on). */
  clock?: Clock;
}

/** An in-flight response: settles with how it ended (false when the streamer died first). */
type Settle = (complete: boolean | undefined) => void;

export class RecordsStreamer {
  readonly #options: RecordsStreamerOptions;
  readonly #clock: Clock;
  readonly #entry: string;
  readonly #pending = new Map<number, Settle>();
  /** Responses waiting for the streamer being started to be ready (#whenReady). */
  readonly #waiters = new Set<(ready: boolean) => void>();
  /** Responses whose socket is on its way: the streamer has not yet taken it, or not been seen to. */
  readonly #sending = new Set<number>();
  #proc: ChildProcess | undefined;
  /** The running streamer has said it is ready (child-runtime's ready message). */
  #ready = false;
  #restartTimer: ClockTimer | undefined;
  #idleTimer: ClockTimer | undefined;
  /** A streamer stopped for being idle: its exit is no failure and starts no other. */
  #retired: ChildProcess | undefined;
  #starts = 0;
  #failures = 0;
  #nextId = 0;
  #closed = false;

  constructor(options: RecordsStreamerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    // The same kind of file as this one: .ts under tsx, .js when built.
    const here = fileURLToPath(import.meta.url);
    this.#entry = here.replace(/records-streamer\.[cm]?[jt]s$/, `records-streamer-main${extname(here)}`);
  }

  /** The streamer's pid, while one runs. */
  get pid(): number | undefined {
    return isAlive(this.#proc) ? this.#proc!.pid : undefined;
  }

  /** False once the streamer failed too often (or the worker is closing): the worker writes bodies itself. */
  get usable(): boolean {
    return !this.#closed && this.#failures < FAILURES_TO_GIVE_UP;
  }

  /** Starts a streamer unless one runs (or is due to restart); while usable, it is started again when it dies. */
  start(): void {
    if (this.usable && !isAlive(this.#proc) && this.#restartTimer === undefined) this.#spawn();
  }

  /**
   * Has the streamer write one response to `socket`. Resolves true when the whole body was
   * written, false when it was cut short (the client left, a read failed, the streamer
   * died), and undefined when the streamer could not take the socket: none is ready (it
   * failed too often, died before it was ready, or did not start within START_WAIT_MS) or
   * the send was refused. The socket and the body are then still the caller's. With no
   * streamer running, this call starts one and waits until it is ready.
   */
  async write(
    socket: Socket,
    status: number,
    headers: RawHeaders[],
    parts: readonly PortablePart[],
  ): Promise<boolean | undefined> {
    if (!(await this.#whenReady())) return undefined;
    const proc = this.#proc!;
    if (socket.destroyed) return false; // the client left while the streamer started
    this.#clock.clear(this.#idleTimer);
    this.#idleTimer = undefined;
    const id = this.#nextId++;
    const message: StreamRecords = { type: "stream-records", id, status, headers, parts: toWire(parts) };
    return new Promise((resolve) => {
      this.#pending.set(id, resolve);
      this.#sending.add(id);
      sendSocketToChild(proc, message, socket, (outcome) => {
        this.#sending.delete(id);
        if (outcome === "refused") {
          // Never taken, even by a streamer that died a moment ago (child-process.ts): the
          // socket and the body are still the caller's, untouched.
          if (this.#pending.delete(id)) resolve(undefined);
          else socket.destroy(); // settled meanwhile: the worker is closing
          return;
        }
        socket.destroy(); // taken (or given up on): ours goes, the rest is the streamer's
        // Given up on, or taken by a streamer whose exit came first (skipped there as still on its way).
        if (outcome === "lost" || !isAlive(proc)) this.#settle(id, false);
      });
    });
  }

  /**
   * True once a streamer is ready to take a response: at once when one is, else when the
   * one this call starts (or that is starting) says it is ready. False when none will be
   * soon: the worker is closing, the streamer failed too often, or it exited or took
   * longer than START_WAIT_MS before it was ready.
   */
  #whenReady(): Promise<boolean> {
    if (!this.usable) return Promise.resolve(false);
    if (this.#ready && isAlive(this.#proc)) return Promise.resolve(true);
    this.start();
    if (!isAlive(this.#proc)) return Promise.resolve(false); // a restart is due after a death
    return new Promise((resolve) => {
      let timer: ClockTimer | undefined;
      const waiter = (ready: boolean) => {
        this.#clock.clear(timer);
        resolve(ready);
      };
      this.#waiters.add(waiter);
      timer = this.#clock.setTimeout(() => this.#startWaiters(false, waiter), START_WAIT_MS);
      timer.unref();
    });
  }

  /** Tells the responses waiting for the streamer to start (or only `one` of them) whether it is ready. */
  #startWaiters(ready: boolean, one?: (ready: boolean) => void): void {
    const waiters = one === undefined ? [...this.#waiters] : [one];
    for (const waiter of waiters) if (this.#waiters.delete(waiter)) waiter(ready);
  }

  /** Stops the streamer; responses in flight end cut short. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#clock.clear(this.#restartTimer);
    this.#clock.clear(this.#idleTimer);
    this.#startWaiters(false);
    await stopChild(this.#proc, CLOSE_GRACE_MS);
    for (const id of [...this.#pending.keys()]) this.#settle(id, false);
  }

  #settle(id: number, complete: boolean): void {
    const settle = this.#pending.get(id);
    if (settle === undefined) return;
    this.#pending.delete(id);
    settle(complete);
    this.#idleAfter();
  }

  /** With nothing in flight, the streamer is stopped after idleMs unless a response comes first. */
  #idleAfter(): void {
    if (this.#pending.size > 0 || !this.#ready || this.#closed) return;
    this.#clock.clear(this.#idleTimer);
    this.#idleTimer = this.#clock.setTimeout(() => {
      this.#idleTimer = undefined;
      if (this.#pending.size > 0 || !this.#ready) return;
      const proc = this.#proc;
      this.#retired = proc;
      this.#proc = undefined;
      this.#ready = false;
      this.#options.metrics.streamerUp(false);
      void stopChild(proc, CLOSE_GRACE_MS);
    }, this.#options.idleMs ?? RECORDS_IDLE_MS);
    this.#idleTimer.unref();
  }

  #spawn(): void {
    const { shard, nice, logger, metrics } = this.#options;
    const proc = spawnChild({ name: `shard-${shard}-records`, entry: this.#entry, config: { nice } }, ++this.#starts);
    this.#proc = proc;
    metrics.streamerStarted();
    proc.on("message", (message: { type?: unknown }) => {
      if (message?.type === "ready" && proc === this.#proc) {
        this.#ready = true;
        metrics.streamerUp(true);
        this.#startWaiters(true);
        this.#idleAfter();
      } else if (isRecordsStreamed(message)) {
        this.#failures = 0;
        metrics.handoffBytes(message.bytes);
        this.#settle(message.id, message.complete === true);
      }
    });
    proc.once("error", (err) => logger.warn({ err }, `shard-${shard}: records streamer error`));
    proc.once("exit", (code, signal) => {
      if (proc === this.#retired) {
        this.#retired = undefined;
        return; // stopped for being idle, with nothing in flight
      }
      this.#ready = false;
      metrics.streamerUp(false);
      this.#startWaiters(false); // it died before it was ready: the worker writes those itself
      // What it took is cut; a socket still on its way is settled by its send (write()).
      const cut = [...this.#pending.keys()].filter((id) => !this.#sending.has(id));
      for (const id of cut) this.#settle(id, false);
      if (this.#closed) return;
      this.#failures++;
      const how = signal ?? `code ${code}`;
      const fields = { pid: proc.pid, exit: how, cut: cut.length };
      if (!this.usable) {
        logger.error(
          fields,
          `shard-${shard}: records streamer exited (${how}) ${FAILURES_TO_GIVE_UP} times in a row; this worker writes records bodies itself from now on`,
        );
        return;
      }
      logger.warn(
        fields,
        `shard-${shard}: records streamer exited (${how}); its ${cut.length} response(s) were cut short; a new one starts, and until it is ready the worker writes records itself`,
      );
      this.#restartTimer = this.#clock.setTimeout(() => {
        this.#restartTimer = undefined;
        this.start();
      }, RESTART_DELAY_MS);
      this.#restartTimer.unref();
    });
  }
}
