// Entry point of a worker process: one shard. Loads the tokenizer and the session core,
// serves the router over a Unix socket (a fresh path per epoch, handed to the host in
// the ready message), and reports ready only once it can answer.
import { join } from "node:path";
import pino from "pino";
import { startChildRuntime } from "../actors/index.ts";
import { createSessionCore, type SessionCoreOptions } from "../sessions/index.ts";
import { listenChannels } from "../transport/index.ts";
import { workerHandler } from "./worker-handler.ts";
import { WorkerMetrics } from "./worker-metrics.ts";

/** What the host passes a worker: the session core's plain options plus its shard. */
export type WorkerConfig = Omit<SessionCoreOptions, "tokenizerFolder" | "notFoundHint" | "logger" | "recordStore" | "onUpstream"> & {
  index: number;
  socketDir: string;
  logLevel: string;
};

const runtime = startChildRuntime<WorkerConfig>();
const config = runtime.config;
const logger = pino({ level: config.logLevel, base: { proc: `shard-${config.index}`, epoch: config.epoch } }, pino.destination(2));

function startCore() {
  try {
    return createSessionCore(coreOptions());
  } catch (err) {
    // Bad configuration (e.g. a tokenizer folder without tokenizer.json): one clear line,
    // then a non-zero exit that supervision records and, past its limit, escalates.
    logger.fatal({ code: (err as { code?: string }).code }, `shard-${config.index} cannot start: ${(err as Error).message}`);
    process.exit(1);
  }
}

const coreOptions = (): SessionCoreOptions => {
  const { index, socketDir, logLevel, name, epoch, ...options } = config;
  return {
    ...options,
    // Sessions live in this process's memory: after a restart, earlier ones are gone.
    notFoundHint: epoch > 1 ? ` (shard ${index} restarted; sessions created on it before the restart were lost)` : undefined,
    logger,
    onUpstream: metrics.observeUpstream,
  };
};
const metrics = new WorkerMetrics(config.index, () => core.sessionCount());
const core = startCore();

const socketPath = join(config.socketDir, `shard-${config.index}.${config.epoch}.sock`);
const server = await listenChannels(socketPath, (channel) => channel.serve(workerHandler(core, metrics)));
runtime.onClose(async () => {
  await server.close();
  await core.close();
});
runtime.ready({ socketPath });
