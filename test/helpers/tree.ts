// The tree in the test process: the real router app (server/router/router-app.ts), N real
// worker handlers (server/worker/worker-handler.ts), each serving its own session core over
// a real channel on a real temporary Unix socket, the real engine adapters, and the
// simulated engine — wired the way router-main.ts and worker-main.ts wire them, but with no
// child process, no supervisor and no IPC. One tokenizer folder per directory is loaded
// once per test process and shared by every worker and the engine.
//
// Use it for what goes through HTTP, the router, the channel and the core (routes, auth,
// streaming, engine APIs, families); keep startSessionServer (real processes) where the
// process is the point: supervision, restarts, records handoff, the CLI, durability, chaos.
// The handle answers the SessionServer calls those suites use (url, createSession,
// samples, pause/resume/rollout, shutdown), and `app.inject` drives the router without a port.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pino from "pino";
import type { FastifyInstance } from "fastify";
import { createEngine, type EngineApi } from "../../engine/index.ts";
import {
  bundledQwen3Dir,
  createSessionCore,
  JournalRecordStore,
  MemoryRecordStore,
  type MessageMatcher,
  type RecordStore,
  type SessionCore,
  type SessionCoreOptions,
  type TitoFamilyName,
  type TokenizerFolder,
  type TrainingSample,
} from "../../sessions/index.ts";
import { listenChannels, type ChannelServer } from "../../transport/index.ts";
import { buildRouterApp } from "../../server/router/router-app.ts";
import { RolloutDoor } from "../../server/router/rollout-door.ts";
import { ShardLinks } from "../../server/router/shard-links.ts";
import type { RouterStatus } from "../../server/router/supervision-view.ts";
import { workerHandler } from "../../server/worker/worker-handler.ts";
import { WorkerMetrics } from "../../server/worker/worker-metrics.ts";
import { RolloutClient, type PauseOptions } from "../../server/host/rollout-client.ts";
import { startSimEngine, type SimEngine, type SimEngineOptions } from "../../server/sim-engine/sim-engine.ts";
import type { TreeSnapshot } from "../../actors/index.ts";
import type { Clock } from "../../buffers/clock.ts";
import type { CreatedSession } from "../../server/host/session-server.ts";
import { CreateSessionError, SamplesRequestError } from "../../server/host/errors.ts";
import { errorText } from "../../server/host/http-text.ts";
import { call } from "./server.ts";
import { folderAt } from "../sessions/fixtures.ts";

/**
 * The tokenizer folder at `dir` (default: the bundled Qwen3 one), loaded once per test
 * process: the fixtures' cache, so qwen3() and npmFolder() give the same folder.
 */
export function sharedFolder(dir: string = bundledQwen3Dir()): TokenizerFolder {
  return folderAt(dir);
}

export interface TreeOptions {
  /** Worker handlers (shards). Default 2. */
  workers?: number;
  /** An engine to talk to; without one a simulated engine starts on the same folder (see `sim`). */
  engineUrl?: string;
  /** Options of the simulated engine started when no engineUrl is given. */
  sim?: Omit<SimEngineOptions, "tokenizerFolder" | "tokenizerDir">;
  engineApi?: EngineApi;
  tokenizerDir?: string;
  /** A folder already loaded in this process (wins over tokenizerDir). */
  tokenizerFolder?: TokenizerFolder;
  titoFamily?: TitoFamilyName;
  chatTemplateKwargs?: Record<string, unknown>;
  allowedAppendRoles?: string[];
  messageMatcher?: MessageMatcher;
  routingReplay?: boolean;
  indexerReplay?: boolean;
  engineTimeoutMs?: number;
  engineConnectTimeoutMs?: number;
  authToken?: string;
  agentProxyAllow?: string[];
  bodyLimit?: number;
  shardWaitMs?: number;
  holdTimeoutMs?: number;
  sessionIdleTtlS?: number;
  /** "memory" (default) or "journal" (then dataDir: shard-<i>/ in it, as worker-main.ts). */
  durability?: "memory" | "journal";
  dataDir?: string;
  /** pino level of the router's and the cores' logs (stderr); default: no logs. */
  logLevel?: string;
  /** The clock of idle expiry and the door's hold timeouts (test/helpers/manual-clock.ts); default the system's. */
  clock?: Clock;
  /** `--max-inflight-turns` and `--max-queued-turns` (server/router/admission.ts); default unlimited. */
  maxInflightTurns?: number;
  maxQueuedTurns?: number;
  /** `--anthropic-ping-ms`: the streamed Messages route's ping interval (worker-main.ts). */
  anthropicPingMs?: number;
  /** Further session-core options, as the host hands them to worker-main.ts (the cache salt, …). */
  core?: Pick<SessionCoreOptions, "sessionBudget" | "cacheSalt" | "generationConfig" | "trajectory">;
}

export interface InProcessTree {
  /** The router app listening on 127.0.0.1, a free port. */
  readonly url: string;
  readonly engineUrl: string;
  /** The router's Fastify app (inject() drives it without a socket). */
  readonly app: FastifyInstance;
  /** The simulated engine, when the tree started one. */
  readonly engine: SimEngine | undefined;
  /** Each shard's session core, by index. */
  readonly cores: readonly SessionCore[];
  readonly folder: TokenizerFolder;
  readonly door: RolloutDoor;
  /** What /supervision answers: every part runs in this process. */
  tree(): TreeSnapshot;
  createSession(sessionId?: string): Promise<CreatedSession>;
  samples(sessionId: string, opts?: { maxSeqLen?: number }): Promise<TrainingSample>;
  pause: RolloutClient["pause"];
  resume: RolloutClient["resume"];
  rollout: RolloutClient["rollout"];
  shutdown(): Promise<void>;
}

interface Shard {
  core: SessionCore;
  server: ChannelServer;
}

async function startShard(
  index: number,
  options: TreeOptions,
  folder: TokenizerFolder,
  engineUrl: string,
  socketDir: string,
): Promise<Shard> {
  const logger = options.logLevel
    ? pino({ level: options.logLevel, base: { proc: `shard-${index}` } }, pino.destination(2))
    : undefined;
  const recordStore: RecordStore =
    options.durability === "journal"
      ? await JournalRecordStore.open({ dir: join(options.dataDir!, `shard-${index}`), fsync: "never", logger })
      : new MemoryRecordStore();
  const core: SessionCore = createSessionCore({
    engine: createEngine({
      api: options.engineApi ?? "sglang-chat",
      engineUrl,
      timeoutMs: options.engineTimeoutMs ?? 600_000,
      connectTimeoutMs: options.engineConnectTimeoutMs ?? 10_000,
      routingReplay: options.routingReplay ?? false,
      indexerReplay: options.indexerReplay ?? false,
      dropAuthorization: options.authToken !== undefined,
      pooledReplies: !recordStore.retainsReplyBuffers,
      observe: (...args) => metrics.observeUpstream(...args),
      onMalformedToolCalls: (...args) => metrics.observeMalformedToolCalls(...args),
      onEngineAbort: (...args) => metrics.engineAborted(...args),
    }),
    tokenizerFolder: folder,
    titoFamily: options.titoFamily,
    chatTemplateKwargs: options.chatTemplateKwargs,
    allowedAppendRoles: options.allowedAppendRoles,
    messageMatcher: options.messageMatcher,
    logger,
    recordStore,
    sessionIdleTtlS: options.sessionIdleTtlS,
    onSessionExpired: () => metrics.sessionExpired(),
    onTurnReplayed: () => metrics.turnReplayed(),
    clock: options.clock,
    ...options.core,
  });
  const metrics: WorkerMetrics = new WorkerMetrics(index, () => core.sessionCount());
  await core.recover();
  const socketPath = join(socketDir, `shard-${index}.1.sock`);
  const server = await listenChannels(socketPath, (channel) =>
    channel.serve(workerHandler(core, metrics, undefined, { pingMs: options.anthropicPingMs })),
  );
  return { core, server };
}

/** Starts the tree; close it with shutdown(). */
export async function startTree(options: TreeOptions = {}): Promise<InProcessTree> {
  const workers = options.workers ?? 2;
  const folder = options.tokenizerFolder ?? sharedFolder(options.tokenizerDir);
  const engine = options.engineUrl
    ? undefined
    : await startSimEngine({ ...options.sim, tokenizerFolder: folder, titoFamily: options.sim?.titoFamily });
  const engineUrl = options.engineUrl ?? engine!.url;
  const socketDir = mkdtempSync(join(tmpdir(), "tito-tree-"));
  const shards: Shard[] = [];
  const cleanup = async () => {
    for (const shard of shards) {
      await shard.server.close();
      await shard.core.close();
    }
    await engine?.close();
    rmSync(socketDir, { recursive: true, force: true });
  };
  try {
    for (let index = 0; index < workers; index++)
      shards.push(await startShard(index, options, folder, engineUrl, socketDir));
  } catch (err) {
    await cleanup();
    throw err;
  }

  const snapshot: TreeSnapshot = {
    state: "running",
    instance_id: randomBytes(16).toString("hex"),
    host_pid: process.pid,
    failure: null,
    router: { pid: process.pid, restarts: 0, state: "running" },
    shards: shards.map((_, index) => ({ index, pid: process.pid, restarts: 0, state: "running" })),
  };
  const status: RouterStatus = { instanceId: snapshot.instance_id, tree: snapshot, events: [] };
  const links = new ShardLinks(workers, options.shardWaitMs ?? 10_000);
  links.update(
    shards.map((_, index) => ({
      index,
      state: "running",
      epoch: 1,
      socketPath: join(socketDir, `shard-${index}.1.sock`),
    })),
  );
  const door = new RolloutDoor({ holdTimeoutMs: options.holdTimeoutMs ?? 600_000, clock: options.clock });
  const app = buildRouterApp({
    links,
    status,
    door,
    bodyLimit: options.bodyLimit ?? 64 * 1024 * 1024,
    authToken: options.authToken,
    agentProxyAllow: options.agentProxyAllow,
    admission: { maxInflight: options.maxInflightTurns ?? 0, maxQueued: options.maxQueuedTurns ?? 0 },
    logger: options.logLevel ? pino({ level: options.logLevel, base: { proc: "router" } }, pino.destination(2)) : false,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;

  const headers = (): Record<string, string> =>
    options.authToken === undefined ? {} : { authorization: `Bearer ${options.authToken}` };
  const rollout = new RolloutClient(url, () => ({
    "content-type": "application/json",
    accept: "application/json",
    ...headers(),
  }));
  let stopping: Promise<void> | undefined;
  return {
    url,
    engineUrl,
    app,
    engine,
    cores: shards.map((s) => s.core),
    folder,
    door,
    tree: () => structuredClone(snapshot),
    async createSession(sessionId) {
      const res =
        sessionId === undefined
          ? await call<{ session_id: string; session_token?: string }>(url, "POST", "/sessions", undefined, headers())
          : await call<{ session_id: string; session_token?: string }>(
              url,
              "PUT",
              `/sessions/${encodeURIComponent(sessionId)}`,
              undefined,
              headers(),
            );
      if (res.status !== (sessionId === undefined ? 200 : 201))
        throw new CreateSessionError(res.status, errorText(res.text));
      const created: CreatedSession = {
        sessionId: res.json.session_id,
        shard: Number(res.headers.get("x-tito-shard")),
      };
      if (res.json.session_token !== undefined) created.sessionToken = res.json.session_token;
      return created;
    },
    async samples(sessionId, opts = {}) {
      const body = opts.maxSeqLen === undefined ? {} : { max_seq_len: opts.maxSeqLen };
      const res = await call<TrainingSample>(url, "POST", `/sessions/${encodeURIComponent(sessionId)}/samples`, body, {
        ...headers(),
      });
      if (res.status !== 200) throw new SamplesRequestError(sessionId, res.status, errorText(res.text));
      return res.json;
    },
    pause: (opts?: PauseOptions) => rollout.pause(opts),
    resume: (weightVersion: string) => rollout.resume(weightVersion),
    rollout: () => rollout.rollout(),
    shutdown() {
      stopping ??= (async () => {
        links.close();
        await app.close();
        await cleanup();
      })();
      return stopping;
    },
  };
}
