// A worker's Prometheus metrics (server/protocol/metric-series.ts), labelled with its shard.
// The router asks for them over the transport (op "metrics") and merges every shard's into
// GET /metrics, so the router never parses a session body to count anything.
import { getHeapCodeStatistics, getHeapSpaceStatistics } from "node:v8";
import { Counter, Gauge, Histogram, MetricSet, type MetricJson } from "../protocol/metric-series.ts";
import type { UpstreamObservation } from "../../engine/index.ts";
import type { ShardOp } from "../protocol/shard-protocol.ts";

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

export class WorkerMetrics {
  readonly #set: MetricSet;
  readonly #engine: Histogram;
  readonly #ops: Histogram;
  readonly #replyBytes: Counter;
  readonly #inflight: Gauge;
  readonly #malformedToolCalls: Counter;
  readonly #engineAborts: Counter;
  readonly #expired: Counter;
  readonly #handoffs: Counter;
  readonly #handoffBytes: Counter;
  readonly #streamerStarts: Counter;
  readonly #streamed: Counter;
  readonly #streamerUp: Gauge;
  readonly #replayed: Counter;
  readonly #treeNodes: Counter;
  readonly #treeBranches: Counter;
  readonly #treeRetries: Counter;
  readonly #forks: Counter;
  /** The memory read right after a full GC, for the memory gauges of that scrape (json). */
  #afterGc: MemoryReading | undefined;

  constructor(shard: number, sessionCount: () => number) {
    const set = (this.#set = new MetricSet({ shard: String(shard) }));
    this.#engine = new Histogram(set, {
      name: "tito_engine_request_duration_seconds",
      help: "Engine (upstream) request latency seen by the worker, by path and status (0 = no reply).",
      labelNames: ["path", "status"],
      buckets: LATENCY_BUCKETS,
    });
    this.#ops = new Histogram(set, {
      name: "tito_worker_operation_duration_seconds",
      help: "Time a worker spent on one operation (chat includes the engine call), by op and status.",
      labelNames: ["op", "status"],
      buckets: LATENCY_BUCKETS,
    });
    this.#replyBytes = new Counter(set, {
      name: "tito_worker_reply_bytes_total",
      help: "Reply body bytes produced by the worker, by op.",
      labelNames: ["op"],
    });
    this.#malformedToolCalls = new Counter(set, {
      name: "tito_malformed_tool_calls_total",
      help: "Tool-call blocks in token-level completions that did not parse (left in the content).",
    });
    this.#engineAborts = new Counter(set, {
      name: "tito_engine_aborts_total",
      help: "Generations the engine aborted (finish reason abort): answered 503 TITO_ERR_ENGINE_ABORTED, never committed.",
    });
    this.#expired = new Counter(set, {
      name: "tito_sessions_expired_total",
      help: "Sessions deleted for being idle longer than --session-idle-ttl-s.",
    });
    this.#replayed = new Counter(set, {
      name: "tito_replayed_turns_total",
      help: "SDK retries of a session's last committed turn answered with its committed reply again, no engine call (docs/http.md).",
    });
    // Tree-mode sessions (docs/trajectories.md): nodes / sessions is the nodes per session.
    this.#treeNodes = new Counter(set, {
      name: "tito_trajectory_nodes_total",
      help: "Nodes (committed turns) added to tree-mode sessions.",
    });
    this.#treeBranches = new Counter(set, {
      name: "tito_trajectory_branches_total",
      help: "Tree-mode nodes whose parent already had a child: each opened a new branch (retries included).",
    });
    this.#treeRetries = new Counter(set, {
      name: "tito_trajectory_retries_total",
      help: "Tree-mode nodes that retried a sibling with the same history (retry_of set).",
    });
    this.#forks = new Counter(set, {
      name: "tito_forks_total",
      help: "Sessions forked from another session's turn (POST /sessions/{id}/fork).",
    });
    this.#handoffs = new Counter(set, {
      name: "tito_worker_records_handoffs_total",
      help: "Records GETs whose client socket the worker was handed, by outcome: written, cut (client left or body failed), expired (kept response never claimed), unclaimed (socket without a kept response).",
      labelNames: ["outcome"],
    });
    this.#handoffBytes = new Counter(set, {
      name: "tito_worker_handoff_bytes_total",
      help: "Records body bytes the worker wrote straight to clients' sockets (the records handoff).",
    });
    this.#streamerStarts = new Counter(set, {
      name: "tito_worker_records_streamer_starts_total",
      help: "Records streamer processes the worker started (docs/architecture.md); more than one means one died.",
    });
    this.#streamed = new Counter(set, {
      name: "tito_worker_records_streamed_total",
      help: "Records GETs handed to the worker that its records streamer wrote (the others of tito_worker_records_handoffs_total the worker wrote itself).",
    });
    this.#streamerUp = new Gauge(set, {
      name: "tito_worker_records_streamer_up",
      help: "1 while the worker's records streamer is ready to write records GETs; 0 while it starts, after it failed, or with records in memory.",
    });
    this.#inflight = new Gauge(set, {
      name: "tito_worker_inflight_requests",
      help: "Requests the worker is handling now.",
    });
    memoryGauges(set, () => this.#afterGc ?? readMemory());
    new Gauge(set, {
      name: "tito_sessions",
      help: "Live sessions on the shard.",
      collect: (gauge) => gauge.set(sessionCount()),
    });
  }

  observeUpstream = (o: UpstreamObservation): void => {
    this.#engine.observe({ path: o.path, status: String(o.status) }, o.seconds);
  };

  sessionExpired = (): void => {
    this.#expired.inc();
  };

  forked = (): void => {
    this.#forks.inc();
  };

  turnReplayed = (): void => {
    this.#replayed.inc();
  };

  treeNode = (): void => void this.#treeNodes.inc();
  treeBranch = (): void => void this.#treeBranches.inc();
  treeRetry = (): void => void this.#treeRetries.inc();

  observeMalformedToolCalls = (count: number): void => {
    if (count > 0) this.#malformedToolCalls.inc(count);
  };

  engineAborted = (): void => {
    this.#engineAborts.inc();
  };

  handoff = (outcome: "written" | "cut" | "expired" | "unclaimed"): void => {
    this.#handoffs.inc({ outcome });
  };

  handoffBytes = (bytes: number): void => {
    this.#handoffBytes.inc(bytes);
  };

  streamerStarted = (): void => {
    this.#streamerStarts.inc();
  };

  streamed = (): void => {
    this.#streamed.inc();
  };

  streamerUp = (up: boolean): void => {
    this.#streamerUp.set(up ? 1 : 0);
  };

  /**
   * The registry's metrics as JSON. With `gc` (GET /metrics?gc=1) the memory series are read
   * right after the full GC `gc` runs, before anything else: rendering the other metrics
   * first (histograms with every label set) allocated 60-290 KiB that the memory gauges then
   * counted as heap used, different on every scrape, although the heap a GC leaves was
   * steady to a few KiB (bench:memory, docs/benchmark-history.md, issues 43 and 47).
   */
  json(gc?: () => void): MetricJson[] {
    if (gc === undefined) return this.#set.json();
    gc();
    this.#afterGc = readMemory(true);
    try {
      return this.#set.json();
    } finally {
      this.#afterGc = undefined;
    }
  }

  /** Wraps one operation: in-flight count, duration and reply bytes. Only known ops are labels. */
  async track<T extends { status: number; body?: unknown }>(op: ShardOp, run: () => Promise<T>): Promise<T> {
    const end = this.#ops.startTimer({ op });
    this.#inflight.inc();
    let status = 500;
    try {
      const res = await run();
      status = res.status;
      this.#replyBytes.inc({ op }, bodyBytes(res.body));
      return res;
    } finally {
      this.#inflight.dec();
      end({ status: String(status) });
    }
  }
}

interface MemoryReading {
  usage: NodeJS.MemoryUsage;
  /** V8's code spaces, bytes. */
  code: number;
  /** Compiled code and bytecode with their metadata (v8.getHeapCodeStatistics), bytes: read after a GC only. */
  compiled?: { code: number; bytecode: number };
}

/** `compiled`: also what the heap holds of code and bytecode, a walk of the whole heap (~10 ms at 90 MB). */
function readMemory(compiled = false): MemoryReading {
  let code = 0;
  for (const space of getHeapSpaceStatistics()) if (space.space_name.startsWith("code_")) code += space.space_used_size;
  const usage = process.memoryUsage();
  if (!compiled) return { usage, code };
  const stats = getHeapCodeStatistics();
  return { usage, code, compiled: { code: stats.code_and_metadata_size, bytecode: stats.bytecode_and_metadata_size } };
}

/**
 * The worker's memory: RSS, V8 heap used and memory outside the heap (ArrayBuffers, typed
 * arrays' stores), as `read` gives it: at scrape time, or for a scrape asked with `gc` (GET
 * /metrics?gc=1) right after a full GC (WorkerMetrics.json), so they are what is live.
 */
function memoryGauges(set: MetricSet, read: () => MemoryReading): void {
  const gauge = (name: string, help: string, value: (m: MemoryReading) => number) =>
    new Gauge(set, { name, help, collect: (g) => g.set(value(read())) });
  gauge("process_resident_memory_bytes", "Resident set size of the worker process, bytes.", (m) => m.usage.rss);
  gauge("nodejs_heap_size_used_bytes", "V8 heap used by the worker, bytes.", (m) => m.usage.heapUsed);
  gauge("nodejs_heap_size_total_bytes", "V8 heap reserved by the worker, bytes.", (m) => m.usage.heapTotal);
  gauge(
    "nodejs_heap_code_used_bytes",
    "V8 heap used by compiled code (code spaces), bytes: part of nodejs_heap_size_used_bytes that grows with what the worker has run, not with what it holds.",
    (m) => m.code,
  );
  // Bytecode is compiled when a function first runs and flushed after it has not run for a
  // few GCs: the heap used moves by 50-250 KiB with it (bench:memory's fork case), whatever
  // the worker holds. Read only for a scrape after a GC (a walk of the heap), else absent.
  new Gauge(set, {
    name: "nodejs_heap_compiled_bytes",
    help: "V8 heap used by compiled code (kind=code) and bytecode (kind=bytecode) with their metadata, bytes; read only for GET /metrics?gc=1: part of nodejs_heap_size_used_bytes that moves with what the worker has run, not with what it holds.",
    labelNames: ["kind"],
    collect: (g) => {
      g.reset();
      const compiled = read().compiled;
      if (compiled === undefined) return;
      g.set({ kind: "code" }, compiled.code);
      g.set({ kind: "bytecode" }, compiled.bytecode);
    },
  });
  gauge(
    "nodejs_external_memory_bytes",
    "Memory outside the V8 heap held by the worker's JS objects (ArrayBuffers, typed arrays, Buffers), bytes.",
    (m) => m.usage.external,
  );
}

function bodyBytes(body: unknown): number {
  if (Buffer.isBuffer(body)) return body.length;
  if (Array.isArray(body)) return body.reduce((n: number, b: Buffer) => n + b.length, 0);
  return 0; // a streamed body is counted by the router as it relays it
}
