// The actor that owns one child process (the router, or one shard's worker).
// It never lets its process outlive it: the process is killed before a `reset` and in
// afterStop, so a restart never leaves two processes for one child. An unexpected exit
// makes the actor crash with a ChildExitedError; onCrash (synchronous, never throwing)
// asks the restart policy and answers `reset` (respawn after backoff) or `escalate`.
// initialStateFunc never throws: it only arms the timer that sends `spawn`. A message that
// comes with a handle (or bears the handle mark, control-messages.ts) never enters a
// mailbox: onHandle takes it synchronously, whatever it carries, and `running` says which process of each child may be handed one.
// A child that reports a configuration error before it was ever ready (init-failed,
// control-messages.ts) is not restarted: OTP's init rule. Its actor escalates at once with
// a ChildInitError, which the tree's start then fails with.
import type { ChildProcess } from "node:child_process";
import { dispatch, spawn, type MessageContext, type Ref } from "./nact.ts";
import { INIT_FAILED_EXIT, isHandleMessage, type ChildToHost, type InitFailure } from "./control-messages.ts";
import { ChildExitedError, ChildInitError } from "./errors.ts";
import type { EventDraft } from "./events.ts";
import type { EventLogMessage } from "./event-log.ts";
import { isAlive, killNow, sendToChild, spawnChild, stopChild, type ChildSpec } from "./child-process.ts";
import type { RestartPolicy } from "./restart-policy.ts";

export type ChildActorMessage =
  | { type: "spawn" }
  | { type: "exit"; pid: number | null; code: number | null; signal: string | null; initFailure?: InitFailure }
  | { type: "message"; pid: number | null; message: ChildToHost }
  | { type: "send"; message: unknown }
  | { type: "stop" };

/** What a child actor tells its supervisor (ctx.parent). */
export interface ChildStatus {
  type: "child";
  name: string;
  state: "starting" | "running" | "restarting" | "stopped";
  pid: number | null;
  restarts: number;
  epoch: number;
  info?: Record<string, unknown>;
}
export type ChildEscalation = { type: "escalate"; name: string; reason: string };
/** A report the child made beyond its ready message (the router's rollout state), for the supervisor. */
export interface ChildReport {
  type: "report";
  name: string;
  pid: number | null;
  message: Exclude<ChildToHost, { type: "ready" }>;
}

interface ChildState {
  status: "waiting" | "starting" | "running" | "stopping" | "stopped";
  proc?: ChildProcess;
  timer?: NodeJS.Timeout;
}

export interface ChildActorOptions {
  spec: ChildSpec;
  policy: RestartPolicy;
  eventLog: Ref<EventLogMessage>;
  /** SIGTERM -> SIGKILL grace on a requested stop. */
  graceMs: number;
  /** Registry of live processes, shared with the host's exit hook. */
  live: Set<ChildProcess>;
  /** The running process of each child by name: set once it is ready, gone once it exits. */
  running: Map<string, RunningChild>;
  /** A message that came with a handle; without it such a handle is closed. */
  onHandle?: HandleListener;
  /** Told, before the escalation, when the child failed its start with a configuration error. */
  onInitFailure?: (err: ChildInitError) => void;
}

/** A child process that reported ready, and its incarnation. */
export interface RunningChild {
  proc: ChildProcess;
  epoch: number;
}

/** Takes a message that came with a handle, synchronously, from the child named `from`. */
export type HandleListener = (from: string, message: unknown, handle: unknown) => void;

/** What a child actor tells its parent (the supervisor). */
type ToParent = ChildStatus | ChildEscalation | ChildReport;
type Context = MessageContext<ChildActorMessage, ToParent>;

export function spawnChildActor(parent: Ref<ToParent>, options: ChildActorOptions): Ref<ChildActorMessage> {
  const { spec, policy, eventLog, graceMs, live, running } = options;
  const name = spec.name;
  // Incarnation memory: survives nact's reset, which re-runs initialStateFunc.
  let current: ChildProcess | undefined;
  let epoch = 0;
  let restartPending = false;

  const publish = (kind: EventDraft["kind"], pid: number | null, detail: Record<string, unknown> = {}) =>
    dispatch(eventLog, { type: "publish", draft: { actor: name, kind, pid, detail } });
  const tell = (
    parentRef: Ref<ToParent>,
    state: ChildStatus["state"],
    pid: number | null,
    info?: Record<string, unknown>,
  ) =>
    dispatch(parentRef, {
      type: "child",
      name,
      state,
      pid,
      restarts: policy.restarts,
      epoch,
      info,
    } satisfies ChildStatus);

  const onSpawn = (state: ChildState, ctx: Context): ChildState => {
    if (state.status !== "waiting") return state;
    epoch += 1;
    const proc = spawnChild(spec, epoch);
    current = proc;
    live.add(proc);
    const pid = proc.pid ?? null;
    const self = ctx.self;
    let initFailure: InitFailure | undefined;
    proc.on("exit", (code, signal) => {
      live.delete(proc);
      if (running.get(name)?.proc === proc) running.delete(name);
      const exited = () => dispatch(self, { type: "exit", pid, code, signal, initFailure });
      // The init-failed report was written before the exit, but Node may emit the exit
      // first: its IPC messages are all read once the channel disconnects.
      if (code !== INIT_FAILED_EXIT || initFailure !== undefined || !proc.connected) return exited();
      const late = setTimeout(exited, 1_000);
      proc.once("disconnect", () => {
        clearTimeout(late);
        exited();
      });
    });
    proc.on("error", (err) => {
      // A failed spawn never emits "exit": report it as one so the policy sees it.
      if (proc.pid === undefined) dispatch(self, { type: "exit", pid, code: null, signal: null });
      else process.stderr.write(`${name}: child process error: ${err.message}\n`);
    });
    proc.on("message", (message, handle) => {
      const report = message as ChildToHost | null;
      if (handle === undefined && report?.type === "init-failed") {
        initFailure = report.error;
        return;
      }
      if (handle === undefined && !isHandleMessage(message))
        return dispatch(self, { type: "message", pid, message: message as ChildToHost });
      // A socket is never put in a mailbox: it goes on now, or is closed.
      if (options.onHandle) options.onHandle(name, message, handle);
      else (handle as { destroy?: () => void } | undefined)?.destroy?.();
    });
    publish("spawned", pid, { epoch });
    tell(ctx.parent, "starting", pid);
    return { status: "starting", proc };
  };

  const onMessage = (
    state: ChildState,
    msg: Extract<ChildActorMessage, { type: "message" }>,
    ctx: Context,
  ): ChildState => {
    if (msg.pid !== (state.proc?.pid ?? null)) return state; // a previous incarnation
    if (msg.message?.type === "rollout") {
      if (state.status === "starting" || state.status === "running")
        dispatch(ctx.parent, { type: "report", name, pid: msg.pid, message: msg.message } satisfies ChildReport);
      return state;
    }
    if (state.status !== "starting" || msg.message?.type !== "ready") return state;
    policy.noteReady(Date.now());
    if (isAlive(state.proc)) running.set(name, { proc: state.proc!, epoch });
    // Tell the supervisor first: whoever sees the event then already sees the new tree.
    tell(ctx.parent, "running", msg.pid, msg.message.info);
    publish("ready", msg.pid, msg.message.info ?? {});
    if (restartPending) {
      restartPending = false;
      publish("restarted", msg.pid, { restarts: policy.restarts });
    }
    return { ...state, status: "running" };
  };

  const onExit = (state: ChildState, msg: Extract<ChildActorMessage, { type: "exit" }>, _ctx: unknown): ChildState => {
    if (msg.pid !== (state.proc?.pid ?? null)) return state; // a previous incarnation
    if (state.status !== "starting" && state.status !== "running") return state; // we asked for it
    publish("exited", msg.pid, { code: msg.code, signal: msg.signal });
    if (state.status === "starting" && msg.initFailure) throw new ChildInitError(name, msg.initFailure);
    throw new ChildExitedError(name, msg.pid, msg.code, msg.signal);
  };

  const onStop = async (state: ChildState, ctx: Context): Promise<ChildState> => {
    clearTimeout(state.timer);
    if (state.status === "stopped") {
      dispatch(ctx.sender, { stopped: true });
      return state;
    }
    const proc = state.proc;
    const pid = proc?.pid ?? null;
    await stopChild(proc, graceMs);
    publish("stopped", pid, { code: proc?.exitCode ?? null, signal: proc?.signalCode ?? null });
    tell(ctx.parent, "stopped", pid);
    dispatch(ctx.sender, { stopped: true });
    return { status: "stopped", proc };
  };

  return spawn(
    parent,
    (state: ChildState, msg: ChildActorMessage, ctx) => {
      switch (msg.type) {
        case "spawn":
          return onSpawn(state, ctx);
        case "message":
          return onMessage(state, msg, ctx);
        case "exit":
          return onExit(state, msg, ctx);
        case "send":
          if (state.status === "running") sendToChild(state.proc, msg.message);
          return state;
        case "stop":
          return onStop(state, ctx);
      }
    },
    name,
    {
      initialStateFunc: (ctx): ChildState => {
        const delay = policy.takeSpawnDelay();
        const timer = setTimeout(() => dispatch(ctx.self, { type: "spawn" }), delay);
        return { status: "waiting", timer };
      },
      onCrash: (_msg, err, ctx) => {
        try {
          killNow(current);
          if (err instanceof ChildInitError) {
            // OTP's init rule: a child that failed its start is not restarted; the start fails.
            options.onInitFailure?.(err);
            dispatch(ctx.parent, {
              type: "escalate",
              name,
              reason: `${err.message} (a configuration error before ready: not restarted)`,
            } satisfies ChildEscalation);
            return ctx.escalate;
          }
          if (!(err instanceof ChildExitedError)) {
            // A bug in this actor, not a process death: restart it the same way.
            process.stderr.write(`${name}: actor fault: ${(err as Error)?.stack ?? err}\n`);
          }
          const decision = policy.noteExit(Date.now());
          if (decision.action === "restart") {
            restartPending = true;
            publish("restarting", null, {
              attempt: decision.attempt,
              backoff_ms: decision.backoffMs,
              unstable: decision.unstable,
            });
            tell(ctx.parent, "restarting", null);
            return ctx.reset;
          }
          const cause = err instanceof Error ? err.message : String(err);
          dispatch(ctx.parent, {
            type: "escalate",
            name,
            reason: `${cause}; ${decision.reason}`,
          } satisfies ChildEscalation);
          return ctx.escalate;
        } catch {
          return ctx.escalate;
        }
      },
      afterStop: (state: ChildState) => {
        clearTimeout(state?.timer);
        killNow(state?.proc);
        if (isAlive(current)) killNow(current);
      },
    },
  );
}
