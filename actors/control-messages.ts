// The control plane between the host and its children, over Node's IPC channel.
// Small JSON messages only; the data plane (HTTP bodies, records) never passes here.
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

/** Child -> host. */
export type ChildToHost = { type: "ready"; info: Record<string, unknown> };

/** Host -> router process. */
export type HostToRouter =
  | { type: "shards"; shards: ShardRoute[] }
  | { type: "tree"; tree: TreeSnapshot }
  | { type: "events"; events: SupervisionEvent[] };
