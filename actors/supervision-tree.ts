// The host's handle on the actor system: starts nact with the event log and the
// supervisor, mirrors the tree for synchronous reads, and tears everything down once.
// Nothing here is on the data path but one hand-over: sendSocket passes a socket a child
// sent (the router's records handoff) on to the running process of another. Process-exit
// hooks SIGKILL whatever children are alive if the host exits without shutdown(); they are
// removed after shutdown.
import { EventEmitter } from "node:events";
import type { ChildProcess } from "node:child_process";
import {
  dispatch,
  query,
  start as startActorSystem,
  stop as stopActor,
  type ActorSystemRef,
  type Ref,
} from "./nact.ts";
import type { Socket } from "node:net";
import type { HandleListener, RunningChild } from "./child-actor.ts";
import { killNow, sendSocketToChild, type ChildSpec, type SocketSent } from "./child-process.ts";
import type { TreeSnapshot } from "./control-messages.ts";
import { ActorQueryTimeoutError, SessionServerFailedError, type ChildInitError } from "./errors.ts";
import { jsonlWriter, spawnEventLog, type EventLogMessage } from "./event-log.ts";
import { EventRing, type EventListener, type SupervisionEvent } from "./events.ts";
import type { RestartPolicyOptions } from "./restart-policy.ts";
import { spawnSupervisor, type SupervisorMessage } from "./supervisor.ts";

export interface SupervisionTreeOptions {
  instanceId: string;
  router: ChildSpec;
  shards: ChildSpec[];
  restart?: Partial<RestartPolicyOptions>;
  /** SIGTERM -> SIGKILL grace when stopping a child. */
  graceMs?: number;
  /** Also append every event to this JSONL file. */
  eventsFile?: string;
  /** Extra listeners, attached before the first event. */
  listeners?: EventListener[];
  /**
   * Runs when the process exits before shutdown() (e.g. a forced exit), after the children
   * are killed: the owner's own last clean-up (the data-dir lock), from the tree's one
   * "exit" listener so that many servers in one process add one listener each.
   */
  onProcessExit?: () => void;
  /**
   * Takes every message a child sends with a handle (the router's records handoff),
   * synchronously, before anything reaches an actor; without it such a handle is closed.
   */
  onHandle?: HandleListener;
}

export class SupervisionTree extends EventEmitter {
  readonly ring = new EventRing(10_000);
  #system: ActorSystemRef;
  #supervisor: Ref<SupervisorMessage>;
  #eventLog: Ref<EventLogMessage>;
  #tree: TreeSnapshot;
  /** Every child process of this tree that has not exited yet. */
  #live = new Set<ChildProcess>();
  /** The running (ready, not exited) process of each child, by name. */
  #running = new Map<string, RunningChild>();
  #stopping: Promise<void> | undefined;
  /** The configuration error a child failed its start with, if one did (child-actor.ts). */
  #initError: ChildInitError | undefined;
  #exitHook = () => {
    for (const proc of this.#live) killNow(proc);
  };
  #onProcessExit: (() => void) | undefined;
  #processExit = () => {
    this.#exitHook();
    this.#onProcessExit?.();
  };
  readonly #graceMs: number;

  constructor(options: SupervisionTreeOptions) {
    super();
    this.#graceMs = options.graceMs ?? 5_000;
    const listeners = new Set<EventListener>([(event) => this.emit("event", event)]);
    if (options.eventsFile) listeners.add(jsonlWriter(options.eventsFile));
    for (const listener of options.listeners ?? []) listeners.add(listener);
    listeners.add((event) => {
      // Keep the router's /supervision/events current; it got the backlog when it became ready.
      if (this.#supervisor)
        dispatchSafe(this.#supervisor, { type: "forward-to-router", message: { type: "events", events: [event] } });
    });
    this.#tree = {
      state: "starting",
      instance_id: options.instanceId,
      host_pid: process.pid,
      failure: null,
      router: { pid: null, restarts: 0, state: "starting" },
      shards: options.shards.map((_, index) => ({ index, pid: null, restarts: 0, state: "starting" })),
    };
    this.#onProcessExit = options.onProcessExit;
    process.on("exit", this.#processExit);
    this.#system = startActorSystem();
    const eventLog = (this.#eventLog = spawnEventLog(this.#system, { ring: this.ring, listeners }));
    this.#supervisor = spawnSupervisor(this.#system, {
      instanceId: options.instanceId,
      router: options.router,
      shards: options.shards,
      restart: options.restart ?? {},
      graceMs: this.#graceMs,
      eventLog,
      ring: this.ring,
      live: this.#live,
      running: this.#running,
      onHandle: options.onHandle,
      onInitFailure: (err) => (this.#initError ??= err),
      onTree: (tree) => {
        this.#tree = tree;
        this.emit("tree", tree);
      },
    });
  }

  tree(): TreeSnapshot {
    return structuredClone(this.#tree);
  }

  /** Throws SessionServerFailedError once the tree has failed or stopped. */
  check(): void {
    const tree = this.#tree;
    if (tree.failure) throw new SessionServerFailedError(`session server failed: ${tree.failure}`);
    if (tree.state === "stopping" || tree.state === "stopped")
      throw new SessionServerFailedError("session server is shut down");
  }

  /**
   * Resolves once every child is running; rejects if the tree fails first: with the
   * ChildInitError of a child that failed its start with a configuration error, else with
   * SessionServerFailedError.
   */
  whenRunning(): Promise<TreeSnapshot> {
    return new Promise((resolve, reject) => {
      const onTree = (tree: TreeSnapshot) => {
        if (tree.state === "running") {
          this.off("tree", onTree);
          // Resolve once the startup events (published just after) are readable too.
          query(this.#eventLog, { type: "flush" }, 5_000).then(
            () => resolve(tree),
            () => resolve(tree),
          );
        } else if (tree.failure || tree.state === "stopped") {
          this.off("tree", onTree);
          reject(
            this.#initError ??
              new SessionServerFailedError(`session server failed to start: ${tree.failure ?? "stopped"}`),
          );
        }
      };
      this.on("tree", onTree);
      onTree(this.#tree);
    });
  }

  /** Resolves once the tree has failed (stopped every child) — never when it is healthy. */
  whenFailed(): Promise<string> {
    return new Promise((resolve) => {
      const onTree = (tree: TreeSnapshot) => {
        if (tree.failure && tree.state === "failed") {
          this.off("tree", onTree);
          resolve(tree.failure);
        }
      };
      this.on("tree", onTree);
      onTree(this.#tree);
    });
  }

  /**
   * Sends `message` with `socket` to child `name` if its running process is incarnation
   * `epoch`; `done` says how it went (child-process.ts, SocketSent). "refused" at once,
   * nothing sent, when there is no such process (exited, restarting, or a newer one).
   */
  sendSocket(name: string, epoch: number, message: object, socket: Socket, done: (outcome: SocketSent) => void): void {
    const child = this.#running.get(name);
    if (child === undefined || child.epoch !== epoch) return done("refused");
    sendSocketToChild(child.proc, message, socket, done);
  }

  events(since = 0): SupervisionEvent[] {
    return this.ring.since(since);
  }

  /** Stop every child (SIGTERM, grace, SIGKILL) and the actor system. Idempotent. */
  shutdown(): Promise<void> {
    this.#stopping ??= this.#teardown();
    return this.#stopping;
  }

  async #teardown(): Promise<void> {
    const timeoutMs = this.#graceMs * 2 + 10_000;
    try {
      await query(this.#supervisor, { type: "shutdown" }, timeoutMs);
    } catch (err) {
      process.stderr.write(`${new ActorQueryTimeoutError("supervisor shutdown", timeoutMs, { cause: err }).message}\n`);
    }
    // Every event published so far (the final `stopped` included) reaches the listeners.
    await query(this.#eventLog, { type: "flush" }, 5_000).catch(() => undefined);
    this.#exitHook(); // nothing should be left; this is the backstop
    stopActor(this.#system);
    process.off("exit", this.#processExit);
    this.emit("shutdown");
  }
}
function dispatchSafe<Msg>(ref: Ref<Msg>, message: Msg) {
  try {
    dispatch(ref, message);
  } catch {
    // the system is stopping
  }
}
