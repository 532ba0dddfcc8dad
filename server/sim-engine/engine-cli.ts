// The simulated engine's command line: its flags parsed into options (a bad flag exits 2
// with the usage text), and the serving loop — the ready line on stdout, a clean exit on
// SIGINT/SIGTERM. engine-main.ts is `npm run engine`; the benchmarks' pre-built engine
// (bench/prebuilt-engine-main.ts) adds its own flags around the same two functions.
// Nothing but the ready line goes to stdout (callers parse it); logs and errors go to stderr.
import { parseArgs } from "node:util";
import { DEFAULT_ROUTING_SHAPE } from "./sim-engine-payload.ts";
import { ENGINE_FLAGS, ENGINE_USAGE as USAGE } from "./engine-flags.ts";
import { startSimEngine, type SimEngineOptions } from "./sim-engine.ts";

export function fail(message: string): never {
  process.stderr.write(`sim-engine: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

export function integer<T extends number | undefined>(
  name: string,
  value: string | undefined,
  fallback: T,
): number | T {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) fail(`--${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  return n;
}

function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) fail(`--${flag} must be one of ${allowed.join(", ")}`);
  return value as T;
}

/** The options `npm run engine` flags ask for; a bad flag exits 2 with the usage text. */
export function parseEngineArgs(argv: string[]): SimEngineOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: ENGINE_FLAGS,
    }));
  } catch (err) {
    fail((err as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const options: SimEngineOptions = {
    host: values.host ?? "127.0.0.1",
    port: integer("port", values.port, 30000),
    tokenizerDir: values.tokenizer,
    titoFamily: values["tito-family"],
    latencyMs: integer("latency-ms", values["latency-ms"], 0),
    tokenMs: integer("token-ms", values["token-ms"], 0),
    incrementalStreaming: values["incremental-streaming"] ?? false,
    cumulativeLogprobs: values["cumulative-logprobs"] ?? false,
    maxModelLen: integer("max-model-len", values["max-model-len"], 40960),
    vllmNullMaxTokens: oneOf("vllm-null-max-tokens", values["vllm-null-max-tokens"], ["500", "16"]),
    vllmNoTokenIds: values["vllm-no-token-ids"] ?? false,
    vllmRoutedExperts: oneOf("vllm-routed-experts", values["vllm-routed-experts"], ["uint8", "uint16", "int32"]),
    routedExpertsLayers: integer(
      "routed-experts-layers",
      values["routed-experts-layers"],
      DEFAULT_ROUTING_SHAPE.layers,
    ),
    routedExpertsTopK: integer("routed-experts-top-k", values["routed-experts-top-k"], DEFAULT_ROUTING_SHAPE.topK),
    routedExpertsBytes: integer("routed-experts-bytes", values["routed-experts-bytes"], undefined),
    alwaysRoutedExperts: values["always-routed-experts"] ?? false,
    reasoning: values.reasoning ?? false,
    prefixCache: values["prefix-cache"] ?? false,
    promptTokensDetails: values["prompt-tokens-details"] ?? false,
    weightVersion: values["weight-version"],
    abortAtToken:
      values["abort-at-token"] === undefined ? undefined : integer("abort-at-token", values["abort-at-token"], 0),
    logger: values.log ?? false,
  };
  if (options.routedExpertsLayers! < 1 || options.routedExpertsTopK! < 1)
    fail("--routed-experts-layers and --routed-experts-top-k must be at least 1");
  return options;
}

/** Starts the engine, prints the ready line, and closes it on SIGINT/SIGTERM. */
export async function serveEngine(options: SimEngineOptions): Promise<void> {
  const engine = await startSimEngine(options).catch((err: Error) => {
    process.stderr.write(`sim-engine: cannot start: ${err.message}\n`);
    process.exit(1);
  });
  process.stdout.write(`sim-engine ready url=${engine.url}\n`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`sim-engine: ${signal}, closing\n`);
    engine.close().then(
      () => process.exit(0),
      (err: Error) => {
        process.stderr.write(`sim-engine: close failed: ${err.message}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
}
