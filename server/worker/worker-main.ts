// Entry point of a worker process: one shard. Loads the tokenizer and the session core,
// opens the shard's record store and (journal) replays it, serves the router over a Unix
// socket (a fresh path per epoch, handed to the host in the ready message), and reports
// ready only once it can answer with every session it had before.
import { join } from "node:path";
import pino from "pino";
import { Socket } from "node:net";
import { startChildRuntime } from "../../actors/index.ts";
import { isRecordsHandoff } from "../handoff/records-handoff-message.ts";
import { createEngine, type EngineApi } from "../../engine/index.ts";
import {
  createSessionCore,
  JournalRecordStore,
  MemoryRecordStore,
  type FsyncPolicy,
  type RecordStore,
  type SessionCoreOptions,
  SessionConfigError,
  TokenizerLoadError,
} from "../../sessions/index.ts";
import { listenChannels } from "../../transport/index.ts";
import { workerHandler } from "./worker-handler.ts";
import { WorkerDoor } from "./worker-door.ts";
import { resumingEngine } from "../../engine/resumed-turn.ts";
import { WorkerMetrics } from "./worker-metrics.ts";
import { ParkedResponses } from "./records-handoff.ts";
import { RecordsStreamer } from "./records-streamer.ts";

/** What the host passes a worker: the session core's plain options, its engine, and its shard. */
export type WorkerConfig = Omit<
  SessionCoreOptions,
  "engine" | "tokenizerFolder" | "notFoundHint" | "logger" | "recordStore" | "onSessionExpired" | "onTurnReplayed"
> & {
  engineUrl: string;
  engineApi: EngineApi;
  /** `--engine-model`: the served model name sent upstream (vllm-completions). */
  engineModel?: string;
  /** `--engine-session-headers`: the headers a session's engine requests carry its routing key in. */
  engineSessionHeaders: string[];
  engineTimeoutMs: number;
  engineConnectTimeoutMs: number;
  routingReplay: boolean;
  indexerReplay: boolean;
  /** Set when the server owns authentication: the client's `authorization` never goes upstream. */
  authToken?: string;
  index: number;
  socketDir: string;
  logLevel: string;
  durability: "journal" | "memory";
  /** The journal directory of all shards (this one uses shard-<index>/ in it). */
  dataDir?: string;
  fsync: FsyncPolicy;
  /** The nice value of the records streamer (records-streamer.ts), which journal-backed records GETs go through. */
  recordsNice: number;
  /** False: no streamer, the worker writes every records GET itself. */
  recordsStreamer: boolean;
  /** How long the streamer lives on with no records GET in flight (records-streamer.ts). */
  recordsIdleMs?: number;
  /** `--records-handoff-min-bytes`: smaller records bodies go back on the channel (records-handoff.ts). */
  recordsHandoffMinBytes?: number;
  /** `--anthropic-ping-ms`: a streamed Anthropic turn's ping interval while it waits on the engine (messages-turn.ts). */
  anthropicPingMs?: number;
  /** `--on-engine-abort`: "resume" continues an engine-aborted turn (engine/resumed-turn.ts). */
  onEngineAbort?: "retry" | "resume";
  /** `--hold-timeout-ms`: how long an aborted turn waits for the resume of a paused server. */
  holdTimeoutMs?: number;
};

const runtime = startChildRuntime<WorkerConfig>();
const config = runtime.config;
const logger = pino(
  { level: config.logLevel, base: { proc: `shard-${config.index}`, epoch: config.epoch } },
  pino.destination(2),
);

// Bad configuration (e.g. a tokenizer folder without tokenizer.json, append roles the family
// cannot take) or a corrupt journal: one clear line, then an exit. A configuration error is
// reported to the host first, which then fails the start at once instead of restarting a
// worker that would fail the same way (OTP's init rule, actors/child-actor.ts); anything
// else is a non-zero exit that supervision records and, past its limit, escalates.
async function cannotStart(err: unknown): Promise<never> {
  logger.fatal(
    { code: (err as { code?: string }).code },
    `shard-${config.index} cannot start: ${(err as Error).message}`,
  );
  if (err instanceof SessionConfigError || err instanceof TokenizerLoadError) return runtime.initFailed(err);
  process.exit(1);
}

async function openStore(): Promise<RecordStore> {
  if (config.durability === "memory") return new MemoryRecordStore();
  if (!config.dataDir) throw new Error("durability journal needs a data directory");
  return JournalRecordStore.open({ dir: join(config.dataDir, `shard-${config.index}`), fsync: config.fsync, logger });
}

const coreOptions = (recordStore: RecordStore): SessionCoreOptions => {
  const {
    tokenizerDir,
    titoFamily,
    chatTemplateKwargs,
    allowedAppendRoles,
    messageMatcher,
    index,
    epoch,
    durability,
    sessionIdleTtlS,
    generationConfig,
    sessionBudget,
    cacheSalt,
    trajectory,
  } = config;
  const adapter = createEngine({
    api: config.engineApi,
    engineUrl: config.engineUrl,
    timeoutMs: config.engineTimeoutMs,
    connectTimeoutMs: config.engineConnectTimeoutMs,
    routingReplay: config.routingReplay,
    indexerReplay: config.indexerReplay,
    dropAuthorization: config.authToken !== undefined,
    // A store that keeps replies as they are (memory) cannot take them in reused buffers.
    pooledReplies: !recordStore.retainsReplyBuffers,
    observe: metrics.observeUpstream,
    onMalformedToolCalls: metrics.observeMalformedToolCalls,
    onEngineAbort: metrics.engineAborted,
    engineModel: config.engineModel,
    sessionHeaders: config.engineSessionHeaders,
  });
  // Late bound: the core (and its tokenizer) exists only once these options are taken.
  const decode = (ids: readonly number[]) => core.decode(ids);
  const engine = config.onEngineAbort === "resume" ? resumingEngine(adapter, { door, decode }) : adapter;
  return {
    engine,
    tokenizerDir,
    titoFamily,
    chatTemplateKwargs,
    allowedAppendRoles,
    messageMatcher,
    generationConfig,
    // Only in-memory sessions die with their process; a journal brings them back.
    notFoundHint:
      durability === "memory" && epoch > 1
        ? ` (shard ${index} restarted; sessions created on it before the restart were lost)`
        : undefined,
    logger,
    recordStore,
    sessionIdleTtlS,
    sessionBudget,
    cacheSalt,
    onSessionExpired: metrics.sessionExpired,
    onTurnReplayed: metrics.turnReplayed,
    trajectory: { ...trajectory, onNode: metrics.treeNode, onBranch: metrics.treeBranch, onRetry: metrics.treeRetry },
  };
};
const metrics = new WorkerMetrics(config.index, () => core.sessionCount());
const door = new WorkerDoor(config.holdTimeoutMs ?? 600_000);
const core = await openStore()
  .then((store) => createSessionCore(coreOptions(store)))
  .catch(cannotStart);
logger.info(
  { titoFamily: core.familyName, tokenizerFromCache: core.tokenizerFromCache },
  `shard-${config.index} follows the ${core.familyName} tito family`,
);
try {
  const started = Date.now();
  const { sessions, turns } = await core.recover();
  if (config.durability === "journal")
    logger.info({ sessions, turns, ms: Date.now() - started }, `shard-${config.index} replayed its journal`);
} catch (err) {
  await cannotStart(err);
}

// Loading the tokenizer leaves tens of MB of garbage (the parsed tokenizer.json, its source
// text), and a replay more. V8 would keep it until the first full GC, which under load can
// be many turns away, so it would sit in every worker's RSS and peak RSS. One full GC now
// (exposed by the --expose-gc the host passes workers) gives that memory back before the
// worker reports ready (docs/benchmark.md).
(globalThis as { gc?: () => void }).gc?.();

// Records GETs the router hands over: the response kept for a ticket goes straight to the
// client's socket, which the host passes on (records-handoff.ts). Bodies read from the
// journal are written by the worker's records streamer, at a lower CPU priority; it is
// started when a GET needs it and stops once idle, and until it is ready, the worker writes
// them itself.
const streamer =
  config.durability === "journal" && config.recordsStreamer
    ? new RecordsStreamer({
        shard: config.index,
        nice: config.recordsNice,
        idleMs: config.recordsIdleMs,
        logger,
        metrics,
      })
    : undefined;
const parked = new ParkedResponses(metrics, streamer, { minBytes: config.recordsHandoffMinBytes });
runtime.onMessage((message, handle) => {
  if (!(handle instanceof Socket)) return;
  if (isRecordsHandoff(message)) void parked.deliver(message, handle);
  else handle.destroy();
});

const socketPath = join(config.socketDir, `shard-${config.index}.${config.epoch}.sock`);
const server = await listenChannels(socketPath, (channel) =>
  channel.serve(workerHandler(core, metrics, parked, { pingMs: config.anthropicPingMs }, door)),
);
runtime.onClose(async () => {
  await server.close();
  parked.close();
  await streamer?.close();
  await core.close();
});
runtime.ready({ socketPath });
