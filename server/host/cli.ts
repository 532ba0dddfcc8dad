// `tito-server serve`: the command-line front of startSessionServer(). Prints exactly one
// line on stdout once ready (docs/operations.md); everything else — logs and one readable line
// per supervision event — goes to stderr. SIGINT/SIGTERM shut down cleanly (exit 0); a
// failed tree prints why and exits 1; bad flags exit 2.
import { parseArgs } from "node:util";
import { formatEvent } from "../../actors/index.ts";
import { InvalidOptionError } from "./errors.ts";
import { TITO_FAMILIES, type SessionServerOptions } from "./options.ts";
import { startSessionServer } from "./session-server.ts";

export const HELP = `Usage: tito-server serve [options]

Runs the TITO session server: one HTTP router and N worker processes under supervision.

Options:
  --host ADDR                  listen address (default 127.0.0.1)
  --port N                     listen port, 0 = pick a free one (default 8080)
  --workers N                  worker processes / shards (default 8)
  --engine URL                 SGLang-compatible engine; when absent the built-in
                               simulated engine is started (and the log says so)
  --tokenizer DIR              Hugging Face tokenizer folder (default: bundled Qwen3)
  --tito-family NAME           the model family (docs/models.md): default, qwen3,
                               qwennext, qwen35, nemotron3, glm47, kimi25, kimi26,
                               minimax_m25, minimax_m27, deepseekv32, deepseekv4,
                               inkling, llama3, gemma3 (default: detected from the
                               tokenizer)
  --chat-template-kwargs JSON  passed to every chat-template render (default {})
  --allowed-append-roles LIST  comma list of roles a turn may append (default: the
                               family's, docs/models.md)
  --routing-replay             ask the engine for routed_experts (R3) payloads
  --indexer-replay             ask the engine for indexer_topk payloads
  --max-restarts N             restarts of one child within the window before the
                               tree fails; 0 = fail fast (default 3)
  --restart-window-ms N        sliding window for --max-restarts (default 60000)
  --events FILE                also append every supervision event to FILE (JSONL)
  --durability MODE            journal | memory: journal (default) keeps each shard's
                               sessions in an append-only journal that a restarted
                               worker replays; memory loses them with the worker
  --data-dir DIR               where shard journals live, kept (default: a fresh
                               directory under the OS temp dir, removed on shutdown)
  --fsync POLICY               every | interval | never: when journal writes reach
                               the disk (default interval, every 100 ms)
  --engine-api API             sglang-chat (default): the chat route of an SGLang that
                               honours input_ids; sglang-generate: stock SGLang's
                               /generate; vllm-completions: stock vLLM's /v1/completions
  --engine-timeout-ms N        per upstream request (default 600000)
  --engine-connect-timeout-ms N  a connection to the engine not up within N ms is a
                               502 "engine unreachable" (default 10000)
  --auth-token TOKEN           the admin token: require "Authorization: Bearer TOKEN"
                               on every route but /health (or env TITO_AUTH_TOKEN,
                               which keeps it out of ps); POST /sessions then also
                               returns a session token for agents (docs/security.md)
  --agent-proxy-allow LIST     comma list of engine paths a session token may GET
                               through its proxy (default /v1/models,/health,
                               /get_model_info)
  --body-limit BYTES           largest request body, 413 above (default 67108864)
  --shard-wait-ms N            how long a request waits for a restarting shard (default 10000)
  --hold-timeout-ms N          how long a chat turn waits at the door while the server
                               is paused for a weight update (POST /admin/pause) before a
                               503 with Retry-After (default 600000; docs/rl-loop.md)
  --session-idle-ttl-s N       delete sessions idle longer than N seconds, journalled
                               like a DELETE; later requests get 404 "session expired"
                               (default 0: never)
  --sim-latency-ms N           simulated generation time of the built-in engine (default 0)
  --sim-token-ms N             simulated time per generated token of the built-in engine (default 0)
  --log-level LEVEL            pino level: fatal|error|warn|info|debug|trace|silent (default info)
  -h, --help                   show this help

Once ready it prints: tito-server ready url=http://HOST:PORT workers=N instance=<id>
`;

const FLAGS = {
  host: { type: "string" },
  port: { type: "string" },
  workers: { type: "string" },
  engine: { type: "string" },
  tokenizer: { type: "string" },
  "tito-family": { type: "string" },
  "chat-template-kwargs": { type: "string" },
  "allowed-append-roles": { type: "string" },
  "routing-replay": { type: "boolean" },
  "indexer-replay": { type: "boolean" },
  "max-restarts": { type: "string" },
  "restart-window-ms": { type: "string" },
  events: { type: "string" },
  durability: { type: "string" },
  "data-dir": { type: "string" },
  fsync: { type: "string" },
  "engine-api": { type: "string" },
  "engine-timeout-ms": { type: "string" },
  "engine-connect-timeout-ms": { type: "string" },
  "auth-token": { type: "string" },
  "agent-proxy-allow": { type: "string" },
  "body-limit": { type: "string" },
  "shard-wait-ms": { type: "string" },
  "hold-timeout-ms": { type: "string" },
  "session-idle-ttl-s": { type: "string" },
  "sim-latency-ms": { type: "string" },
  "sim-token-ms": { type: "string" },
  "log-level": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

function num(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n))
    throw new InvalidOptionError(`--${flag} must be a number, got ${JSON.stringify(value)}`);
  return n;
}

export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): SessionServerOptions | "help" {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new InvalidOptionError((err as Error).message);
  }
  if (values.help) return "help";
  let kwargs: Record<string, unknown> | undefined;
  if (values["chat-template-kwargs"] !== undefined) {
    try {
      kwargs = JSON.parse(values["chat-template-kwargs"]);
    } catch (err) {
      throw new InvalidOptionError(`--chat-template-kwargs must be a JSON object: ${(err as Error).message}`);
    }
    if (!kwargs || typeof kwargs !== "object" || Array.isArray(kwargs))
      throw new InvalidOptionError("--chat-template-kwargs must be a JSON object");
  }
  const family = values["tito-family"];
  if (family !== undefined && !(TITO_FAMILIES as readonly string[]).includes(family))
    throw new InvalidOptionError(
      `--tito-family must be one of ${TITO_FAMILIES.join(", ")}; got ${JSON.stringify(family)}`,
    );
  return {
    host: values.host,
    port: num("port", values.port) ?? 8080,
    workers: num("workers", values.workers),
    engineUrl: values.engine,
    tokenizerDir: values.tokenizer,
    titoFamily: family as SessionServerOptions["titoFamily"],
    chatTemplateKwargs: kwargs,
    allowedAppendRoles: values["allowed-append-roles"]
      ?.split(",")
      .map((r) => r.trim())
      .filter(Boolean),
    routingReplay: values["routing-replay"],
    indexerReplay: values["indexer-replay"],
    maxRestarts: num("max-restarts", values["max-restarts"]),
    restartWindowMs: num("restart-window-ms", values["restart-window-ms"]),
    eventsFile: values.events,
    durability: values.durability as SessionServerOptions["durability"],
    dataDir: values["data-dir"],
    fsync: values.fsync as SessionServerOptions["fsync"],
    engineApi: values["engine-api"] as SessionServerOptions["engineApi"],
    engineTimeoutMs: num("engine-timeout-ms", values["engine-timeout-ms"]),
    engineConnectTimeoutMs: num("engine-connect-timeout-ms", values["engine-connect-timeout-ms"]),
    authToken: values["auth-token"] ?? (env.TITO_AUTH_TOKEN || undefined),
    agentProxyAllow: values["agent-proxy-allow"]
      ?.split(",")
      .map((p) => p.trim())
      .filter(Boolean),
    bodyLimit: num("body-limit", values["body-limit"]),
    shardWaitMs: num("shard-wait-ms", values["shard-wait-ms"]),
    holdTimeoutMs: num("hold-timeout-ms", values["hold-timeout-ms"]),
    sessionIdleTtlS: num("session-idle-ttl-s", values["session-idle-ttl-s"]),
    simLatencyMs: num("sim-latency-ms", values["sim-latency-ms"]),
    simTokenMs: num("sim-token-ms", values["sim-token-ms"]),
    logLevel: values["log-level"],
  };
}

async function serve(argv: string[]): Promise<number> {
  const parsed = parseServeArgs(argv);
  if (parsed === "help") {
    process.stdout.write(HELP);
    return 0;
  }
  const log = (line: string) => process.stderr.write(`${line}\n`);
  // Said once the server is up: a start refused early (a locked --data-dir) started no engine.
  const server = await startSessionServer({ ...parsed, onEvent: (event) => log(formatEvent(event)) });
  const tree = server.tree();
  if (!parsed.engineUrl)
    log(`tito-server: no --engine given: the built-in simulated engine runs at ${server.engineUrl}`);

  return new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      log(`tito-server: ${signal}: shutting down`);
      void server.shutdown().then(() => resolve(0));
    };
    // Before the ready line: a supervisor that signals as soon as it reads the line must
    // find the handlers in place (the write returns before the next statement runs).
    process.once("SIGINT", () => stop("SIGINT"));
    process.once("SIGTERM", () => stop("SIGTERM"));
    server.on("event", (event) => {
      if (event.actor === "supervisor" && event.kind === "stopped" && server.tree().failure) {
        log(`tito-server: the session server failed: ${server.tree().failure}`);
        void server.shutdown().then(() => resolve(1));
      }
    });
    process.stdout.write(
      `tito-server ready url=${server.url} workers=${tree.shards.length} instance=${tree.instance_id}\n`,
    );
  });
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "-h" || command === "--help" || command === "help") {
    process.stdout.write(HELP);
    return command === undefined ? 2 : 0;
  }
  if (command !== "serve") {
    process.stderr.write(`tito-server: unknown command ${JSON.stringify(command)}\n\n${HELP}`);
    return 2;
  }
  try {
    return await serve(rest);
  } catch (err) {
    if (err instanceof InvalidOptionError) {
      process.stderr.write(`tito-server: ${err.message}\n(see tito-server serve --help)\n`);
      return 2;
    }
    process.stderr.write(`tito-server: ${(err as Error).message}\n`);
    return 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}` || /server\/host\/cli\.[jt]s$/.test(process.argv[1] ?? "")) {
  void main(process.argv.slice(2)).then((code) => process.exit(code));
}
