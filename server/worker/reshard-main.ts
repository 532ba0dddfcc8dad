// Entry point of the one-shot re-shard job the host runs before the tree starts, when a
// --data-dir's journal was written by another worker count (server/host/journal-layout.ts
// decides and switches; this only copies). It places each session by the router's own
// hash, reports what it copied and exits; the old shards are only read.
import pino from "pino";
import { startChildRuntime } from "../../actors/index.ts";
import { reshardJournal } from "../../sessions/index.ts";
import { shardOf } from "../protocol/shard-protocol.ts";

/** What the host passes the job. */
export interface ReshardConfig {
  /** The old shards' directories, in shard order. */
  sources: string[];
  /** The fresh directory the new shards are written to. */
  target: string;
  /** The old and the new worker count (the old one only for the log). */
  from: number;
  workers: number;
  logLevel: string;
}

const runtime = startChildRuntime<ReshardConfig>();
const config = runtime.config;
const logger = pino({ level: config.logLevel, base: { proc: "reshard" } }, pino.destination(2));
const started = Date.now();
try {
  const result = await reshardJournal({ ...config, shardOf });
  logger.info(
    { ...result, ms: Date.now() - started },
    `journal re-sharded from ${config.from} to ${config.workers} workers: ${result.sessions} sessions, ${result.entries} entries`,
  );
  await runtime.report({ type: "ready", info: { ...result } });
  process.exit(0);
} catch (err) {
  await runtime.report({ type: "failed", message: (err as Error).message });
  process.exit(1);
}
