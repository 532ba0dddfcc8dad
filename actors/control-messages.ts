// The control plane between the host and its children, over Node's IPC channel.
// Small JSON messages only; the data plane (HTTP bodies, records) never passes here. The
// one exception is a handle, not bytes, which a child sends another through the host (a
// records GET's client socket, router -> host -> worker: server/handoff/); this layer
// forwards it by its mark (HANDLE_MARK) without knowing what it is.
import type { SupervisionEvent } from "./events.ts";

/** What a shard looks like to the router. */
export interface ShardRoute {
  index: number;
  state: "starting" | "running" | "restarting" | "stopped";
  epoch: number;
  /** Unix socket of the current worker; set only while running. */
  socketPath: string | null;
}

export interface TreeSnapshot {
  state: "starting" | "running" | "failed" | "stopping" | "stopped";
  instance_id: string;
  host_pid: number;
  failure: string | null;
  router: { pid: number | null; restarts: number; state: string };
  shards: Array<{ index: number; pid: number | null; restarts: number; state: string }>;
}

/**
 * The rollout door's state (docs/rl-loop.md): the router owns it while it runs and reports
 * every change; the host keeps the last one and starts a restarted router with it.
 */
export interface RolloutState {
  state: "running" | "paused";
  /** The policy version turns are sent under; null until the first resume. */
  weight_version: string | null;
  /** While paused: the `in_flight` mode of the pause. */
  mode: "drain" | "abort" | "keep" | null;
  /** While paused: when the pause began (ms since the epoch). */
  paused_at: number | null;
}

/** An event of the rollout door, published by the host's event log (actor "router"). */
export interface RolloutEvent {
  kind: "paused" | "resumed";
  detail: Record<string, unknown>;
}

/**
 * Marks a message a child sent with an IPC handle (a socket) for another child, set by
 * ChildRuntime.sendSocket. The supervision layer hands such a message to the host's
 * onHandle at once, never to a mailbox, by this mark alone (child-actor.ts): it forwards
 * handles without knowing what they carry. The mark is there even when the handle got lost
 * on the way (a socket that closed before it was sent).
 */
export const HANDLE_MARK = "withHandle";

export function isHandleMessage(message: unknown): boolean {
  return typeof message === "object" && message !== null && (message as Record<string, unknown>)[HANDLE_MARK] === true;
}

/**
 * Set by sendSocketToChild on a message it sends a child with a socket: the child's runtime
 * answers `{type: "handle-taken", [HANDLE_ID]: id}` once it holds the socket, before its
 * listener can write a byte to it. Until then the socket is only the sender's: Node reports
 * a write to the channel of a child that died a moment ago as a success, so the send's own
 * callback cannot say whether anyone got it.
 */
export const HANDLE_ID = "handleId";
export const HANDLE_TAKEN = "handle-taken";

export function isHandleTaken(message: unknown): message is { type: typeof HANDLE_TAKEN; handleId: number } {
  const m = message as Record<string, unknown> | null;
  return typeof m === "object" && m !== null && m.type === HANDLE_TAKEN && Number.isInteger(m[HANDLE_ID]);
}

/**
 * A child that cannot start for a reason a restart would not change (a configuration error:
 * a tokenizer folder it cannot load, a family that cannot take the options): it reports the
 * coded error, then exits with INIT_FAILED_EXIT. OTP's init rule: a child that fails before
 * it was ever ready is not restarted; the start fails at once with this error.
 */
export interface InitFailure {
  code: string;
  status: number;
  message: string;
}

/** The exit code of a child after an init-failed report (sysexits.h's EX_CONFIG). */
export const INIT_FAILED_EXIT = 78;

/** Child -> host. */
export type ChildToHost =
  | { type: "ready"; info: Record<string, unknown> }
  | { type: "init-failed"; error: InitFailure }
  | { type: "rollout"; rollout: RolloutState; event?: RolloutEvent }
  /** A one-shot job (runChildJob) that could not do its work, and why. */
  | { type: "failed"; message: string };

/** Host -> router process. */
export type HostToRouter =
  | { type: "shards"; shards: ShardRoute[] }
  | { type: "tree"; tree: TreeSnapshot }
  | { type: "events"; events: SupervisionEvent[] };
