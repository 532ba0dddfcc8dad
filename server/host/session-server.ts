// The embedding API: startSessionServer() starts the supervision tree (router + N
// workers as child processes) and returns a handle for a rollout program. The host
// process (the caller's) runs only the actor system: no request's bytes pass through it
// (a records GET's socket is only handed on, router to worker: records-handoff.ts).
// Without engineUrl the built-in simulated engine runs in this process (a stand-in
// for the GPU engine, for development and examples).
import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  runChildJob,
  SessionServerFailedError,
  SupervisionTree,
  type SupervisionEvent,
  type TreeSnapshot,
} from "../../actors/index.ts";
import { lockDataDir, type DataDirLock } from "./data-dir-lock.ts";
import { forwardRecordsHandoff } from "./records-handoff.ts";
import { makeSocketDir, sweepStaleSocketDirs } from "./socket-dir.ts";
import { prepareJournal, type ReshardJob } from "./journal-layout.ts";
import type { TrainingSample } from "../../sessions/index.ts";
import { CreateSessionError, SamplesRequestError } from "./errors.ts";
import { errorText, httpText } from "./http-text.ts";
import { waitHealthy } from "./wait-healthy.ts";
import { createdSession, forkSession, type CreatedSession } from "./session-calls.ts";
export type { CreatedSession } from "./session-calls.ts";
import {
  RolloutClient,
  type PauseOptions,
  type PauseOutcome,
  type ResumeOutcome,
  type RolloutStatus,
} from "./rollout-client.ts";
import { resolveOptions, type ResolvedOptions, type SessionServerOptions } from "./options.ts";
import type { SimEngine } from "../sim-engine/sim-engine.ts";
import type { RouterConfig } from "../router/router-main.ts";
import type { WorkerConfig } from "../worker/worker-main.ts";
import type { ReshardConfig } from "../worker/reshard-main.ts";

// Children run this build (.ts through tsx from source), or dist/ if TITO_CHILD_ENTRIES=dist (test/run.ts).
const toDist = import.meta.url.endsWith(".ts") && process.env.TITO_CHILD_ENTRIES === "dist";
const here = join(dirname(fileURLToPath(import.meta.url)), ...(toDist ? ["../../dist/server/host"] : []));
const entryExt = toDist || import.meta.url.endsWith(".js") ? ".js" : ".ts";

/**
 * The router's live heap is small (~13 MiB) and it allocates ~25 MiB/s of short-lived
 * objects under load. With V8's default heap sizing it then ran a full incremental
 * mark-compact every ~300 ms (each of its ~200 steps a task that wakes the event loop),
 * about a fifth of its CPU on small turns; with a 64 MiB initial old generation it runs
 * 4 in its life and the young generation's scavenges do the work. The cost is up to
 * ~50 MiB more resident garbage in the router (docs/benchmark.md, issue 20). A young
 * generation at V8's minimum (where it starts, and shrinks back to when idle) doubled the
 * router's CPU for a long resent history: 4.5 vs 2.1 ms per turn at 80k tokens (issue 47).
 */
export const ROUTER_NODE_FLAGS = ["--initial-old-space-size=64", "--min-semi-space-size=16"];

/**
 * --expose-gc: a worker collects its start-up garbage before it reports ready (worker-main.ts).
 * No young-generation flags, measured (docs/benchmark-history.md, issue 47, mem2): a cap of
 * 2 x 2-4 MiB gives ~20 MiB back in an idle worker but grew malloc's heap by up to 50 MiB
 * per worker under bench:memory; pinning it at V8's 2 x 16 MiB steadied bench:memory's
 * per-token readings, but its fork case (40k tokens) then read the 16 MiB semi-space V8
 * gives up at idle and takes back on the next turns: 520-800 B per unique token.
 */
export const WORKER_NODE_FLAGS = ["--expose-gc"];

export interface SessionServer {
  /** "http://127.0.0.1:PORT" — the HTTP front door (the router process). */
  readonly url: string;
  /** The engine the workers talk to (the simulated one when none was given). */
  readonly engineUrl: string;
  /** Throws SessionServerFailedError once the tree has failed or was shut down. */
  check(): void;
  /** The supervision tree, as GET /supervision returns it. */
  tree(): TreeSnapshot;
  /** Every supervision event from the start, then live ones until shutdown. */
  readonly events: AsyncIterable<SupervisionEvent>;
  on(event: "event", listener: (event: SupervisionEvent) => void): this;
  off(event: "event", listener: (event: SupervisionEvent) => void): this;
  /** Stop everything: SIGTERM, grace, SIGKILL. Idempotent; concurrent callers share it. */
  shutdown(): Promise<void>;
  /**
   * Creates a session as the admin: POST {url}/sessions (the server picks the id), or
   * PUT {url}/sessions/{sessionId} with the caller's id (behind a balancer that hashes
   * ids; docs/scaling.md). Resolves with the id, the shard that owns it, and, when an
   * admin token is set, its session token (the one credential to hand the agent;
   * docs/security.md). Rejects with CreateSessionError otherwise (409: the id exists).
   */
  createSession(sessionId?: string): Promise<CreatedSession>;
  /**
   * POST {url}/sessions/{id}/fork (docs/http.md): a new session whose history is turns 0..at
   * (a tree-mode session's: the path to node `at`, e.g. "n3"); rejects with ForkSessionError.
   */
  fork(sessionId: string, at: number | string, opts?: { sessionId?: string }): Promise<CreatedSession>;
  /** POST {url}/sessions/{id}/samples (JSON): the session as one training sample; rejects with SamplesRequestError on a non-200. */
  samples(sessionId: string, opts?: { maxSeqLen?: number }): Promise<TrainingSample>;
  /**
   * Closes the rollout door for a weight update (POST /admin/pause; docs/rl-loop.md): new
   * turns wait at the door; turns in flight are drained (default), aborted, or kept.
   * Resolves when the pause has taken effect; rejects with RolloutRequestError.
   */
  pause(opts?: PauseOptions): Promise<PauseOutcome>;
  /** Sets the policy version later turns are sent under and opens the door (POST /admin/resume). */
  resume(weightVersion: string): Promise<ResumeOutcome>;
  /** Where the door stands (GET /admin/rollout): state, weight version, held and in-flight turns. */
  rollout(): Promise<RolloutStatus>;
}

class ServerHandle extends EventEmitter implements SessionServer {
  readonly url: string;
  readonly engineUrl: string;
  readonly #tree: SupervisionTree;
  readonly #cleanup: () => Promise<void>;
  readonly #authToken: string | undefined;
  readonly #rollout: RolloutClient;
  #stopping: Promise<void> | undefined;

  constructor(url: string, engineUrl: string, tree: SupervisionTree, cleanup: () => Promise<void>, authToken?: string) {
    super();
    this.#authToken = authToken;
    this.url = url;
    this.engineUrl = engineUrl;
    this.#tree = tree;
    this.#cleanup = cleanup;
    this.#rollout = new RolloutClient(url, () => this.#headers());
    tree.on("event", (event: SupervisionEvent) => this.emit("event", event));
  }

  check(): void {
    this.#tree.check();
  }

  tree(): TreeSnapshot {
    return this.#tree.tree();
  }

  get events(): AsyncIterable<SupervisionEvent> {
    return iterateEvents(this.#tree);
  }

  async createSession(sessionId?: string): Promise<CreatedSession> {
    const res =
      sessionId === undefined
        ? await httpText(`${this.url}/sessions`, { method: "POST", headers: this.#headers() })
        : await httpText(`${this.url}/sessions/${encodeURIComponent(sessionId)}`, {
            method: "PUT",
            headers: this.#headers(),
          });
    if (res.status !== (sessionId === undefined ? 200 : 201))
      throw new CreateSessionError(res.status, errorText(res.text));
    return createdSession(res);
  }

  fork(sessionId: string, at: number | string, opts?: { sessionId?: string }): Promise<CreatedSession> {
    return forkSession(this.url, this.#headers(), sessionId, at, opts);
  }

  #headers(): Record<string, string> {
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    if (this.#authToken !== undefined) headers.authorization = `Bearer ${this.#authToken}`;
    return headers;
  }

  async samples(sessionId: string, opts: { maxSeqLen?: number } = {}): Promise<TrainingSample> {
    const headers = this.#headers();
    const body = opts.maxSeqLen === undefined ? {} : { max_seq_len: opts.maxSeqLen };
    const res = await httpText(`${this.url}/sessions/${encodeURIComponent(sessionId)}/samples`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
    });
    if (res.status !== 200) throw new SamplesRequestError(sessionId, res.status, errorText(res.text));
    return JSON.parse(res.text) as TrainingSample;
  }

  pause(opts?: PauseOptions): Promise<PauseOutcome> {
    return this.#rollout.pause(opts);
  }

  resume(weightVersion: string): Promise<ResumeOutcome> {
    return this.#rollout.resume(weightVersion);
  }

  rollout(): Promise<RolloutStatus> {
    return this.#rollout.rollout();
  }

  shutdown(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.#tree.shutdown();
      await this.#cleanup();
    })();
    return this.#stopping;
  }
}

async function* iterateEvents(tree: SupervisionTree): AsyncGenerator<SupervisionEvent> {
  let last = 0;
  let wake: (() => void) | undefined;
  let done = false;
  const onEvent = () => wake?.();
  const onShutdown = () => {
    done = true;
    wake?.();
  };
  tree.on("event", onEvent);
  tree.once("shutdown", onShutdown);
  try {
    for (;;) {
      const batch = tree.events(last);
      for (const event of batch) {
        last = event.seq;
        yield event;
      }
      if (done) return;
      if (batch.length === 0) await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    tree.off("event", onEvent);
    tree.off("shutdown", onShutdown);
  }
}

function childSpecs(
  opts: ResolvedOptions,
  engineUrl: string,
  instanceId: string,
  socketDir: string,
  dataDir: string | undefined,
) {
  const router: RouterConfig = {
    host: opts.host,
    port: opts.port,
    workers: opts.workers,
    bodyLimit: opts.bodyLimit,
    shardWaitMs: opts.shardWaitMs,
    instanceId,
    authToken: opts.authToken,
    agentProxyAllow: opts.agentProxyAllow,
    logLevel: opts.logLevel,
    holdTimeoutMs: opts.holdTimeoutMs,
    ...{ maxInflightTurns: opts.maxInflightTurns, maxQueuedTurns: opts.maxQueuedTurns },
  };
  const shards = Array.from({ length: opts.workers }, (_, index) => {
    const config: WorkerConfig = {
      index,
      socketDir,
      engineUrl,
      tokenizerDir: opts.tokenizerDir,
      titoFamily: opts.titoFamily,
      chatTemplateKwargs: opts.chatTemplateKwargs,
      allowedAppendRoles: opts.allowedAppendRoles,
      messageMatcher: opts.messageMatcher,
      routingReplay: opts.routingReplay,
      indexerReplay: opts.indexerReplay,
      engineApi: opts.engineApi,
      ...{ engineModel: opts.engineModel, cacheSalt: opts.cacheSalt, engineSessionHeaders: opts.engineSessionHeaders },
      generationConfig: opts.generationConfig === "on",
      ...{ onEngineAbort: opts.onEngineAbort, holdTimeoutMs: opts.holdTimeoutMs },
      ...{ engineTimeoutMs: opts.engineTimeoutMs, engineConnectTimeoutMs: opts.engineConnectTimeoutMs },
      authToken: opts.authToken,
      logLevel: opts.logLevel,
      durability: opts.durability,
      dataDir,
      fsync: opts.fsync,
      recordsNice: opts.recordsNice,
      recordsStreamer: opts.recordsStreamer,
      recordsIdleMs: opts.recordsIdleMs,
      recordsHandoffMinBytes: opts.recordsHandoffMinBytes,
      sessionIdleTtlS: opts.sessionIdleTtlS,
      anthropicPingMs: opts.anthropicPingMs,
      sessionBudget: { maxTotalTokens: opts.maxSessionTokens, maxTurns: opts.maxSessionTurns },
      trajectory: { mode: opts.trajectory, maxNodes: opts.maxTrajectoryNodes },
    };
    return {
      name: `shard-${index}`,
      entry: join(here, "..", "worker", `worker-main${entryExt}`),
      config: config as unknown as Record<string, unknown>,
      nodeFlags: WORKER_NODE_FLAGS,
    };
  });
  return {
    router: {
      name: "router",
      entry: join(here, "..", "router", `router-main${entryExt}`),
      config: router as unknown as Record<string, unknown>,
      nodeFlags: ROUTER_NODE_FLAGS,
    },
    shards,
  };
}

/** Runs the re-shard job (server/worker/reshard-main.ts) as a child process, to completion. */
async function reshardJob(job: ReshardJob, logLevel: string): Promise<void> {
  const config: ReshardConfig = { ...job, logLevel };
  await runChildJob({
    name: "reshard",
    entry: join(here, "..", "worker", `reshard-main${entryExt}`),
    config: config as unknown as Record<string, unknown>,
  });
}

/** Start the session server: the router and `workers` worker processes under supervision. */
export async function startSessionServer(options: SessionServerOptions = {}): Promise<SessionServer> {
  const opts = resolveOptions(options, { port: 0 });
  const instanceId = randomBytes(16).toString("hex");
  // The data directory's lock comes first: a server that may not run creates nothing.
  let dataDir: string | undefined;
  let lock: DataDirLock | undefined;
  if (opts.durability === "journal" && opts.dataDir !== undefined) {
    mkdirSync((dataDir = resolve(opts.dataDir)), { recursive: true });
    lock = lockDataDir(dataDir, instanceId);
  }
  await sweepStaleSocketDirs();
  let socketDir: string | undefined;
  // A journal directory the caller named is theirs to keep; a default one lives as long as the server.
  let ownDataDir = false;
  let engine: SimEngine | undefined;
  let tree: SupervisionTree | undefined;
  const removeFiles = () => {
    if (socketDir) rmSync(socketDir, { recursive: true, force: true });
    lock?.release();
    if (ownDataDir && dataDir) rmSync(dataDir, { recursive: true, force: true });
  };
  // A process that exits without shutdown() (the CLI's forced exit on a third SIGINT) still
  // gives the lock back: the tree's exit hook kills the children, then runs this.
  const onExit = () => {
    try {
      removeFiles();
    } catch {
      // best effort while the process exits
    }
  };
  const cleanup = async () => {
    await engine?.close();
    removeFiles();
  };
  try {
    socketDir = makeSocketDir();
    if (opts.durability === "journal") {
      if (dataDir === undefined) [dataDir, ownDataDir] = [mkdtempSync(join(tmpdir(), "tito-data-")), true];
      // Shards written by another worker count are re-sharded first (journal-layout.ts).
      await prepareJournal(dataDir, opts.workers, (job) => reshardJob(job, opts.logLevel));
    }
    if (!opts.engineUrl) {
      // Loaded only when needed: with a real engine the host never holds the simulator's
      // HTTP server and tokenizer code.
      const { startSimEngine } = await import("../sim-engine/sim-engine.ts");
      engine = await startSimEngine({
        tokenizerDir: opts.tokenizerDir,
        titoFamily: opts.titoFamily,
        latencyMs: opts.simLatencyMs,
        tokenMs: opts.simTokenMs,
      });
    }
    const engineUrl = opts.engineUrl ?? engine!.url;
    const specs = childSpecs(opts, engineUrl, instanceId, socketDir, dataDir);
    let url = "";
    tree = new SupervisionTree({
      instanceId,
      router: specs.router,
      shards: specs.shards,
      restart: { maxRestarts: opts.maxRestarts, windowMs: opts.restartWindowMs, baseBackoffMs: opts.restartBackoffMs },
      graceMs: opts.shutdownGraceMs,
      eventsFile: opts.eventsFile,
      onProcessExit: onExit,
      // A records GET's socket, router -> worker (records-handoff.ts): never into a mailbox.
      onHandle: (from, message, handle) => forwardRecordsHandoff(tree!, from, message, handle),
      listeners: [
        ...(opts.onEvent ? [opts.onEvent] : []),
        (event) => {
          if (event.actor !== "router" || event.kind !== "ready") return;
          // A restarted router binds the port the first one got, so the URL never changes.
          url ||= String(event.detail.url);
          specs.router.config.port = Number(event.detail.port);
        },
      ],
    });
    const deadline = Date.now() + opts.startTimeoutMs;
    const timer = new Promise<never>((_, reject) => {
      const t = setTimeout(
        () => reject(new SessionServerFailedError(`session server did not start within ${opts.startTimeoutMs} ms`)),
        opts.startTimeoutMs,
      );
      t.unref();
    });
    await Promise.race([tree.whenRunning(), timer]);
    // The ready event reaches listeners through the event-log actor: wait for it.
    while (!url && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    await waitHealthy(url, deadline);
    return new ServerHandle(url, engineUrl, tree, cleanup, opts.authToken);
  } catch (err) {
    await tree?.shutdown();
    await cleanup();
    throw err;
  }
}
