// Entry point of the router process. Tokenizer-free by rule: it imports transport/ and
// the control-message types, never sessions/. The host tells it where each worker
// listens (ShardRoute) and pushes the tree and events for /supervision; it starts with the
// rollout state the host kept (a restarted router comes up paused if the last one was).
import pino from "pino";
import { startChildRuntime, type HostToRouter, type RolloutState } from "../../actors/index.ts";
import { RolloutDoor } from "./rollout-door.ts";
import { RouterListenError } from "./errors.ts";
import { buildRouterApp } from "./router-app.ts";
import { addEvents, type RouterStatus } from "./supervision-view.ts";
import { ShardLinks } from "./shard-links.ts";
import { SocketHandoff } from "./records-handoff.ts";

export interface RouterConfig {
  host: string;
  port: number;
  workers: number;
  bodyLimit: number;
  shardWaitMs: number;
  instanceId: string;
  authToken?: string;
  agentProxyAllow: string[];
  logLevel: string;
  /** How long a chat turn waits at the closed rollout door before a retryable 503. */
  holdTimeoutMs: number;
  /** --max-inflight-turns, --max-queued-turns (admission.ts); 0 = unlimited. */
  maxInflightTurns?: number;
  maxQueuedTurns?: number;
  /** The rollout state to start in: the host's copy of the last one a router reported. */
  rollout?: RolloutState;
}

const runtime = startChildRuntime<RouterConfig>();
const config = runtime.config;
const logger = pino({ level: config.logLevel, base: { proc: "router", epoch: config.epoch } }, pino.destination(2));
const links = new ShardLinks(config.workers, config.shardWaitMs);
const status: RouterStatus = { instanceId: config.instanceId, tree: null, events: [] };

runtime.onMessage((raw) => {
  const message = raw as HostToRouter;
  if (message.type === "shards") links.update(message.shards);
  else if (message.type === "tree") status.tree = message.tree;
  else if (message.type === "events") addEvents(status, message.events);
});

// Every change is reported to the host before it is acknowledged, so a restarted router
// starts from it (paused, with the same weight version).
const door = new RolloutDoor({
  holdTimeoutMs: config.holdTimeoutMs,
  initial: config.rollout,
  report: (rollout, event) => runtime.report({ type: "rollout", rollout, event }),
});

// A records GET's socket goes to its worker through the host, the one process both talk to
// over IPC (records-handoff.ts).
const handoff = new SocketHandoff((message, socket, callback) => runtime.sendSocket(message, socket, callback));

const app = buildRouterApp({
  door,
  handoff,
  links,
  status,
  bodyLimit: config.bodyLimit,
  authToken: config.authToken,
  agentProxyAllow: config.agentProxyAllow,
  logger,
  admission: { maxInflight: config.maxInflightTurns ?? 0, maxQueued: config.maxQueuedTurns ?? 0 },
});
runtime.onClose(async () => {
  links.close();
  await app.close();
});

try {
  await app.listen({ host: config.host, port: config.port });
} catch (err) {
  // A port in use or not ours to take stays so on a restart: a configuration error.
  const listenError = new RouterListenError(`${config.host}:${config.port}`, err as Error);
  logger.fatal({ err }, listenError.message);
  await runtime.initFailed(listenError);
}
const address = app.server.address();
const port = typeof address === "object" && address ? address.port : config.port;
const host = config.host.includes(":") ? `[${config.host}]` : config.host;
runtime.ready({ url: `http://${host}:${port}`, port });
