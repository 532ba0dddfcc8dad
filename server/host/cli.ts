// `tito-server serve`: the command-line front of startSessionServer(). Prints exactly one
// line on stdout once ready (docs/operations.md); everything else — logs and one readable line
// per supervision event — goes to stderr. Every flag is checked before anything starts; bad
// flags exit 2, and their errors name the flag; so does a worker that fails its start with a
// configuration error (never restarted: actors/child-actor.ts). SIGINT/SIGTERM shut down cleanly (exit 0):
// later signals are ignored while it runs, but a third SIGINT forces the exit (130). A
// failed tree prints why and exits 1.
import { parseArgs } from "node:util";
import { ChildInitError, formatEvent } from "../../actors/index.ts";
import { HELP } from "./cli-help.ts";
import { InvalidOptionError } from "./errors.ts";
import { resolveOptions, type SessionServerOptions } from "./options.ts";
import { startSessionServer } from "./session-server.ts";
import { StopSignals } from "./stop-signals.ts";

export { HELP };

export const FLAGS = {
  host: { type: "string" },
  port: { type: "string" },
  workers: { type: "string" },
  engine: { type: "string" },
  tokenizer: { type: "string" },
  "tito-family": { type: "string" },
  "chat-template-kwargs": { type: "string" },
  "allowed-append-roles": { type: "string" },
  "message-matcher": { type: "string" },
  "routing-replay": { type: "boolean" },
  "indexer-replay": { type: "boolean" },
  "max-restarts": { type: "string" },
  "restart-window-ms": { type: "string" },
  events: { type: "string" },
  durability: { type: "string" },
  "data-dir": { type: "string" },
  fsync: { type: "string" },
  "records-nice": { type: "string" },
  "no-records-streamer": { type: "boolean" },
  "records-handoff-min-bytes": { type: "string" },
  "engine-api": { type: "string" },
  "engine-model": { type: "string" },
  "generation-config": { type: "string" },
  "cache-salt": { type: "string" },
  "engine-session-headers": { type: "string" },
  "on-engine-abort": { type: "string" },
  "engine-timeout-ms": { type: "string" },
  "engine-connect-timeout-ms": { type: "string" },
  "auth-token": { type: "string" },
  "agent-proxy-allow": { type: "string" },
  "body-limit": { type: "string" },
  "shard-wait-ms": { type: "string" },
  "hold-timeout-ms": { type: "string" },
  "session-idle-ttl-s": { type: "string" },
  "anthropic-ping-ms": { type: "string" },
  "max-session-tokens": { type: "string" },
  "max-session-turns": { type: "string" },
  trajectory: { type: "string" },
  "max-trajectory-nodes": { type: "string" },
  "max-inflight-turns": { type: "string" },
  "max-queued-turns": { type: "string" },
  "sim-latency-ms": { type: "string" },
  "sim-token-ms": { type: "string" },
  "log-level": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** The flag of each option: an error names what the user typed (`--restart-window-ms`). */
export const FLAG_OF: Partial<Record<keyof SessionServerOptions, string>> = {
  host: "--host",
  port: "--port",
  workers: "--workers",
  engineUrl: "--engine",
  tokenizerDir: "--tokenizer",
  titoFamily: "--tito-family",
  chatTemplateKwargs: "--chat-template-kwargs",
  allowedAppendRoles: "--allowed-append-roles",
  messageMatcher: "--message-matcher",
  routingReplay: "--routing-replay",
  indexerReplay: "--indexer-replay",
  maxRestarts: "--max-restarts",
  restartWindowMs: "--restart-window-ms",
  eventsFile: "--events",
  durability: "--durability",
  dataDir: "--data-dir",
  fsync: "--fsync",
  recordsNice: "--records-nice",
  recordsStreamer: "--no-records-streamer",
  recordsHandoffMinBytes: "--records-handoff-min-bytes",
  engineApi: "--engine-api",
  engineModel: "--engine-model",
  generationConfig: "--generation-config",
  cacheSalt: "--cache-salt",
  engineSessionHeaders: "--engine-session-headers",
  onEngineAbort: "--on-engine-abort",
  engineTimeoutMs: "--engine-timeout-ms",
  engineConnectTimeoutMs: "--engine-connect-timeout-ms",
  authToken: "--auth-token",
  agentProxyAllow: "--agent-proxy-allow",
  bodyLimit: "--body-limit",
  shardWaitMs: "--shard-wait-ms",
  holdTimeoutMs: "--hold-timeout-ms",
  sessionIdleTtlS: "--session-idle-ttl-s",
  anthropicPingMs: "--anthropic-ping-ms",
  maxSessionTokens: "--max-session-tokens",
  maxSessionTurns: "--max-session-turns",
  trajectory: "--trajectory",
  maxTrajectoryNodes: "--max-trajectory-nodes",
  maxInflightTurns: "--max-inflight-turns",
  maxQueuedTurns: "--max-queued-turns",
  simLatencyMs: "--sim-latency-ms",
  simTokenMs: "--sim-token-ms",
  logLevel: "--log-level",
};

/**
 * `--max-restarts -1` as `--max-restarts=-1`: parseArgs reads a value that starts with a
 * dash as an option and calls it ambiguous, where the user meant a (bad) number.
 */
function attachNegativeValues(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const flag = FLAGS[arg.slice(2) as keyof typeof FLAGS] as { type: string } | undefined;
    const next = argv[i + 1];
    if (arg.startsWith("--") && flag?.type === "string" && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

function num(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n))
    throw new InvalidOptionError(`--${flag} must be a number, got ${JSON.stringify(value)}`);
  return n;
}

/** The options of `tito-server serve ARGV`, every value checked; throws InvalidOptionError naming the flag. */
export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): SessionServerOptions | "help" {
  let values;
  try {
    ({ values } = parseArgs({
      args: attachNegativeValues(argv),
      options: FLAGS,
      strict: true,
      allowPositionals: false,
    }));
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
  const options: SessionServerOptions = {
    host: values.host,
    port: num("port", values.port) ?? 8080,
    workers: num("workers", values.workers),
    engineUrl: values.engine,
    tokenizerDir: values.tokenizer,
    titoFamily: values["tito-family"] as SessionServerOptions["titoFamily"],
    chatTemplateKwargs: kwargs,
    allowedAppendRoles: values["allowed-append-roles"]
      ?.split(",")
      .map((r) => r.trim())
      .filter(Boolean),
    messageMatcher: values["message-matcher"] as SessionServerOptions["messageMatcher"],
    routingReplay: values["routing-replay"],
    indexerReplay: values["indexer-replay"],
    maxRestarts: num("max-restarts", values["max-restarts"]),
    restartWindowMs: num("restart-window-ms", values["restart-window-ms"]),
    eventsFile: values.events,
    durability: values.durability as SessionServerOptions["durability"],
    dataDir: values["data-dir"],
    fsync: values.fsync as SessionServerOptions["fsync"],
    recordsNice: num("records-nice", values["records-nice"]),
    recordsStreamer: values["no-records-streamer"] ? false : undefined,
    recordsHandoffMinBytes: num("records-handoff-min-bytes", values["records-handoff-min-bytes"]),
    engineApi: values["engine-api"] as SessionServerOptions["engineApi"],
    engineModel: values["engine-model"],
    generationConfig: values["generation-config"] as SessionServerOptions["generationConfig"],
    cacheSalt: values["cache-salt"] as SessionServerOptions["cacheSalt"],
    engineSessionHeaders: values["engine-session-headers"]
      ?.split(",")
      .map((h) => h.trim())
      .filter(Boolean),
    onEngineAbort: values["on-engine-abort"] as SessionServerOptions["onEngineAbort"],
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
    anthropicPingMs: num("anthropic-ping-ms", values["anthropic-ping-ms"]),
    maxSessionTokens: num("max-session-tokens", values["max-session-tokens"]),
    maxSessionTurns: num("max-session-turns", values["max-session-turns"]),
    trajectory: values.trajectory as SessionServerOptions["trajectory"],
    maxTrajectoryNodes: num("max-trajectory-nodes", values["max-trajectory-nodes"]),
    maxInflightTurns: num("max-inflight-turns", values["max-inflight-turns"]),
    maxQueuedTurns: num("max-queued-turns", values["max-queued-turns"]),
    simLatencyMs: num("sim-latency-ms", values["sim-latency-ms"]),
    simTokenMs: num("sim-token-ms", values["sim-token-ms"]),
    logLevel: values["log-level"],
  };
  // Every value is checked here, before anything starts, and a bad one names its flag.
  resolveOptions(options, { port: 8080, label: (option) => FLAG_OF[option] ?? option });
  return options;
}

async function serve(argv: string[]): Promise<number> {
  const parsed = parseServeArgs(argv);
  if (parsed === "help") {
    process.stdout.write(HELP);
    return 0;
  }
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const signals = new StopSignals(log);
  const server = await startSessionServer({ ...parsed, onEvent: (event) => log(formatEvent(event)) });
  if (!signals.stopping) {
    const tree = server.tree();
    // Said once the server is up: a start refused early (a locked --data-dir) started no engine.
    if (!parsed.engineUrl)
      log(`tito-server: no --engine given: the built-in simulated engine runs at ${server.engineUrl}`);
    process.stdout.write(
      `tito-server ready url=${server.url} workers=${tree.shards.length} instance=${tree.instance_id}\n`,
    );
  }
  return new Promise<number>((resolve) => {
    signals.whenSignalled(() => void server.shutdown().then(() => resolve(0)));
    server.on("event", (event) => {
      if (event.actor === "supervisor" && event.kind === "stopped" && server.tree().failure) {
        log(`tito-server: the session server failed: ${server.tree().failure}`);
        signals.markStopping();
        void server.shutdown().then(() => resolve(1));
      }
    });
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
    // A worker that could not start with these options (e.g. append roles its model family
    // cannot take): a configuration error, like a bad flag, and never restarted.
    if (err instanceof ChildInitError) {
      process.stderr.write(`tito-server: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(`tito-server: ${(err as Error).message}\n`);
    return 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}` || /server\/host\/cli\.[jt]s$/.test(process.argv[1] ?? "")) {
  void main(process.argv.slice(2)).then((code) => process.exit(code));
}
