// The supervisor actor: spawns the event log, the shard actors and the router actor,
// keeps the tree's view (states, pids, restarts), tells the router where each worker
// listens, and fails the whole tree when a child escalates. It owns no process itself.
// Its onCrash only handles escalations (a child over its restart intensity): it stops
// that child and leaves the rest to its own `escalate` message, handled in the mailbox.
import type { ChildProcess } from "node:child_process";
import { dispatch, query, spawn, type ActorSystemRef, type MessageContext, type Ref } from "./nact.ts";
import {
  spawnChildActor,
  type ChildActorMessage,
  type ChildEscalation,
  type ChildReport,
  type ChildStatus,
  type HandleListener,
  type RunningChild,
} from "./child-actor.ts";
import type { ChildSpec } from "./child-process.ts";
import type { ChildInitError } from "./errors.ts";
import type { HostToRouter, ShardRoute, TreeSnapshot } from "./control-messages.ts";
import type { EventDraft, EventRing } from "./events.ts";
import type { EventLogMessage } from "./event-log.ts";
import { RestartPolicy, type RestartPolicyOptions } from "./restart-policy.ts";

export interface SupervisorConfig {
  instanceId: string;
  router: ChildSpec;
  shards: ChildSpec[];
  restart: Partial<RestartPolicyOptions>;
  graceMs: number;
  eventLog: Ref<EventLogMessage>;
  ring: EventRing;
  /** The tree's live child processes (for the host's exit hook). */
  live: Set<ChildProcess>;
  /** The running process of each child (child-actor.ts), and who takes a message with a handle. */
  running: Map<string, RunningChild>;
  onHandle?: HandleListener;
  /** Told when a child failed its start with a configuration error (child-actor.ts). */
  onInitFailure?: (err: ChildInitError) => void;
  /** Called with every new view of the tree (the host keeps it for check()/tree()). */
  onTree(tree: TreeSnapshot): void;
}

export type SupervisorMessage =
  | ChildStatus
  | ChildEscalation
  | ChildReport
  | { type: "forward-to-router"; message: HostToRouter }
  | { type: "shutdown" };

interface SupervisorState {
  tree: TreeSnapshot;
  routes: ShardRoute[];
  children: Map<string, Ref<ChildActorMessage>>;
  everRunning: Set<string>;
}

const SHARD_PREFIX = "shard-";

/** The supervisor's parent is the actor system, which takes no messages. */
type Context = MessageContext<SupervisorMessage, never>;

export function spawnSupervisor(system: ActorSystemRef, config: SupervisorConfig): Ref<SupervisorMessage> {
  const publish = (draft: EventDraft) => dispatch(config.eventLog, { type: "publish", draft });

  const toRouter = (state: SupervisorState, message: HostToRouter) => {
    const router = state.children.get(config.router.name);
    if (router) dispatch(router, { type: "send", message });
  };

  const publishTree = (state: SupervisorState) => {
    config.onTree(structuredClone(state.tree));
    toRouter(state, { type: "tree", tree: state.tree });
  };

  const onChild = (state: SupervisorState, msg: ChildStatus): SupervisorState => {
    const stopping = state.tree.state === "stopping" || state.tree.state === "stopped" || state.tree.state === "failed";
    const entry =
      msg.name === config.router.name
        ? state.tree.router
        : state.tree.shards.find((s) => `${SHARD_PREFIX}${s.index}` === msg.name);
    if (!entry) return state;
    entry.pid = msg.pid;
    entry.restarts = msg.restarts;
    entry.state = msg.state === "starting" && state.everRunning.has(msg.name) ? "restarting" : msg.state;
    if (msg.state === "running") state.everRunning.add(msg.name);

    if (msg.name === config.router.name) {
      if (msg.state === "running") {
        // A (re)started router learns everything it needs from us, never by guessing.
        toRouter(state, { type: "shards", shards: state.routes });
        toRouter(state, { type: "events", events: config.ring.since(0) });
      }
    } else {
      const index = Number(msg.name.slice(SHARD_PREFIX.length));
      const socketPath = msg.state === "running" ? String(msg.info?.socketPath ?? "") || null : null;
      const routeState: ShardRoute["state"] =
        msg.state === "running"
          ? "running"
          : msg.state === "stopped"
            ? "stopped"
            : state.everRunning.has(msg.name)
              ? "restarting"
              : "starting";
      state.routes[index] = { index, state: routeState, epoch: msg.epoch, socketPath };
      toRouter(state, { type: "shards", shards: state.routes });
    }
    if (!stopping && state.tree.state === "starting" && state.everRunning.size === config.shards.length + 1) {
      state.tree.state = "running";
    }
    publishTree(state);
    return state;
  };

  // The router's rollout state lives here between router processes: the router's spec
  // config is what a restarted router starts from, so it comes up paused if it was.
  const onReport = (state: SupervisorState, msg: ChildReport): SupervisorState => {
    if (msg.name !== config.router.name || msg.message.type !== "rollout") return state;
    config.router.config.rollout = msg.message.rollout;
    const event = msg.message.event;
    if (event) publish({ actor: msg.name, kind: event.kind, pid: msg.pid, detail: event.detail });
    return state;
  };

  const stopAll = async (state: SupervisorState, _ctx: unknown) => {
    const stopOne = (ref: Ref<ChildActorMessage>) =>
      query(ref, { type: "stop" }, config.graceMs + 5_000).catch(() => undefined);
    const shards = [...state.children.entries()].filter(([name]) => name !== config.router.name).map(([, ref]) => ref);
    await Promise.all(shards.map(stopOne));
    // The router goes last so /health can answer 503 while the shards stop.
    const router = state.children.get(config.router.name);
    if (router) await stopOne(router);
  };

  const onEscalate = async (state: SupervisorState, msg: ChildEscalation, ctx: Context): Promise<SupervisorState> => {
    if (state.tree.state === "stopping" || state.tree.state === "stopped" || state.tree.state === "failed")
      return state;
    const reason = `${msg.name} escalated: ${msg.reason}`;
    publish({ actor: msg.name, kind: "escalated", pid: null, detail: { reason } });
    state.tree.failure = reason;
    state.tree.state = "stopping";
    publish({ actor: "supervisor", kind: "stopping", pid: process.pid, detail: { reason } });
    publishTree(state);
    state.children.delete(msg.name); // already stopped by onCrash
    const entry =
      msg.name === config.router.name
        ? state.tree.router
        : state.tree.shards.find((s) => `${SHARD_PREFIX}${s.index}` === msg.name);
    if (entry) entry.state = "stopped";
    await stopAll(state, ctx);
    state.tree.state = "failed";
    publish({ actor: "supervisor", kind: "stopped", pid: process.pid, detail: { reason } });
    publishTree(state);
    return state;
  };

  const onShutdown = async (state: SupervisorState, ctx: Context): Promise<SupervisorState> => {
    if (state.tree.state !== "stopped" && state.tree.state !== "failed" && state.tree.state !== "stopping") {
      state.tree.state = "stopping";
      publish({ actor: "supervisor", kind: "stopping", pid: process.pid, detail: { reason: "shutdown" } });
      publishTree(state);
      await stopAll(state, ctx);
      state.tree.state = "stopped";
      publish({ actor: "supervisor", kind: "stopped", pid: process.pid, detail: { reason: "shutdown" } });
      publishTree(state);
    }
    dispatch(ctx.sender, { done: true });
    return state;
  };

  return spawn(
    system,
    async (state: SupervisorState, msg: SupervisorMessage, ctx) => {
      try {
        switch (msg.type) {
          case "child":
            return onChild(state, msg);
          case "escalate":
            return await onEscalate(state, msg, ctx);
          case "report":
            return onReport(state, msg);
          case "forward-to-router":
            toRouter(state, msg.message);
            return state;
          case "shutdown":
            return await onShutdown(state, ctx);
        }
      } catch (err) {
        process.stderr.write(`supervisor: ${(err as Error).stack}\n`);
        return state;
      }
    },
    "supervisor",
    {
      initialStateFunc: (ctx): SupervisorState => {
        const tree: TreeSnapshot = {
          state: "starting",
          instance_id: config.instanceId,
          host_pid: process.pid,
          failure: null,
          router: { pid: null, restarts: 0, state: "starting" },
          shards: config.shards.map((_, index) => ({ index, pid: null, restarts: 0, state: "starting" })),
        };
        const children = new Map<string, Ref<ChildActorMessage>>();
        const options = (spec: ChildSpec) => ({
          spec,
          policy: new RestartPolicy(config.restart),
          eventLog: config.eventLog,
          graceMs: config.graceMs,
          live: config.live,
          running: config.running,
          onHandle: config.onHandle,
          onInitFailure: config.onInitFailure,
        });
        for (const spec of config.shards) children.set(spec.name, spawnChildActor(ctx.self, options(spec)));
        children.set(config.router.name, spawnChildActor(ctx.self, options(config.router)));
        const routes: ShardRoute[] = config.shards.map((_, index) => ({
          index,
          state: "starting",
          epoch: 0,
          socketPath: null,
        }));
        return { tree, routes, children, everRunning: new Set() };
      },
      onCrash: (_msg, _err, ctx, child) => {
        try {
          // An escalating child: stop it here; its `escalate` message fails the tree.
          return child ? ctx.stopChild : ctx.resume;
        } catch {
          return ctx.resume;
        }
      },
    },
  );
}
