// The control plane between the host and its children, over Node's IPC channel.
// Small JSON messages only; the data plane (HTTP bodies, records) never passes here. The
// one exception is a handle, not bytes: a records GET's client socket goes router -> host
// -> worker with a RecordsHandoff (docs/architecture.md, "The records handoff").
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
 * Router -> host -> worker, with the client's socket as the IPC handle. The worker of
 * `shard` kept a records response under `ticket` and writes it to that socket. The host
 * takes this message off the router's channel before anything reaches an actor's mailbox
 * (child-actor.ts) and forwards it at once, only to the process of that shard and `epoch`;
 * when there is none (the worker died or restarted meanwhile) it answers the client
 * the router's 503 (`refusal`) itself.
 */
export interface RecordsHandoff {
  type: "records-handoff";
  shard: number;
  epoch: number;
  ticket: string;
  /** The response headers the router itself adds (x-tito-instance, x-tito-shard). */
  headers: Record<string, string | string[]>;
  /** The router's error for an unavailable worker (its status, code and message), for the host's 503. */
  refusal: { status: number; code: string; message: string };
}

export function isRecordsHandoff(message: unknown): message is RecordsHandoff {
  const m = message as Partial<RecordsHandoff> | null;
  return (
    typeof m === "object" &&
    m !== null &&
    m.type === "records-handoff" &&
    Number.isInteger(m.shard) &&
    Number.isInteger(m.epoch) &&
    typeof m.ticket === "string" &&
    typeof m.headers === "object" &&
    m.headers !== null &&
    typeof m.refusal === "object" &&
    m.refusal !== null &&
    typeof m.refusal.status === "number" &&
    typeof m.refusal.code === "string" &&
    typeof m.refusal.message === "string"
  );
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
