// Entry point of a worker process: one shard. Loads the tokenizer and the session core,
// serves the router over a Unix socket (a fresh path per epoch, handed to the host in
// the ready message), and reports ready only once it can answer.
import { join } from "node:path";
import pino from "pino";
import { startChildRuntime } from "../actors/index.ts";
import { createSessionCore } from "../sessions/index.ts";
import { listenChannels } from "../transport/index.ts";
import { workerHandler } from "./worker-handler.ts";

export interface WorkerConfig {
  index: number;
  socketDir: string;
  engineUrl: string;
  tokenizerDir?: string;
  titoFamily?: "default" | "qwen3";
  chatTemplateKwargs?: Record<string, unknown>;
  allowedAppendRoles?: string[];
  routingReplay?: boolean;
  indexerReplay?: boolean;
  engineTimeoutMs?: number;
  authToken?: string;
  logLevel: string;
}

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

const coreOptions = () => ({
  engineUrl: config.engineUrl,
  tokenizerDir: config.tokenizerDir,
  titoFamily: config.titoFamily,
  chatTemplateKwargs: config.chatTemplateKwargs,
  allowedAppendRoles: config.allowedAppendRoles,
  routingReplay: config.routingReplay,
  indexerReplay: config.indexerReplay,
  engineTimeoutMs: config.engineTimeoutMs,
  authToken: config.authToken,
  // Sessions live in this process's memory: after a restart, earlier ones are gone.
  notFoundHint:
    config.epoch > 1
      ? ` (shard ${config.index} restarted; sessions created on it before the restart were lost)`
      : undefined,
  logger,
});
const core = startCore();

const socketPath = join(config.socketDir, `shard-${config.index}.${config.epoch}.sock`);
const server = await listenChannels(socketPath, (channel) => channel.serve(workerHandler(core)));
runtime.onClose(async () => {
  await server.close();
  await core.close();
});
runtime.ready({ socketPath });
