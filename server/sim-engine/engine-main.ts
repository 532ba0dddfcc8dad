// Standalone CLI for the simulated engine (`npm run engine -- --port P`).
// Owns flag parsing, the ready line on stdout and a clean exit on SIGINT/SIGTERM.
// It never prints anything but the ready line on stdout (callers parse it); logs and
// errors go to stderr.
import { parseArgs } from "node:util";
import { DEFAULT_ROUTING_SHAPE } from "./sim-engine-payload.ts";
import { startSimEngine, type SimEngineOptions } from "./sim-engine.ts";

const USAGE = `Usage: npm run engine -- [flags]

The simulated engine (deterministic replies, tool calls in the model family's format) on
the three engine APIs:
POST /v1/chat/completions (patched SGLang), /generate (SGLang), /v1/completions (vLLM).

  --host HOST                   listen address (default 127.0.0.1)
  --port PORT                   listen port, 0 = a free one (default 30000)
  --tokenizer DIR               Hugging Face tokenizer folder (default: bundled Qwen3)
  --tito-family NAME            the family whose format replies are written in and whose
                                stop token ends them (default: detected from the tokenizer)
  --latency-ms MS               simulated generation time per request (default 0)
  --token-ms MS                 simulated time per generated token; streamed replies
                                (stream: true) send a chunk per token at this pace (default 0)
  --incremental-streaming       /generate streams only what is new in each chunk
                                (SGLang's --incremental-streaming-output)
  --routed-experts-layers N     routed_experts rows are per token (prompt + completion
                                - 1) of N layers × K experts, int32, as SGLang's
                                (default ${DEFAULT_ROUTING_SHAPE.layers})
  --routed-experts-top-k K      experts per token per layer (default ${DEFAULT_ROUTING_SHAPE.topK})
  --routed-experts-bytes N      a fixed routed_experts size instead, bytes before base64
                                (load tests; not per token: POST /samples refuses it)
  --always-routed-experts       add routed_experts even when the request does not ask
  --reasoning                   /generate and /v1/completions open with a <think> block
  --prebuilt-tokens N           pre-built replies of N completion tokens (benchmarks)
  --prebuilt-turns T            pre-build turns 0..T-1 at start (with --prebuilt-tokens)
  --prebuilt-r3-last-bytes B    pre-built routed_experts growing linearly to B bytes on turn T-1
  --log                         fastify request logs on stderr
  --help                        this text

Prints "sim-engine ready url=http://HOST:PORT" on stdout once listening.`;

function fail(message: string): never {
  process.stderr.write(`sim-engine: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function integer<T extends number | undefined>(name: string, value: string | undefined, fallback: T): number | T {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) fail(`--${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  return n;
}

function parse(argv: string[]): SimEngineOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        host: { type: "string" },
        port: { type: "string" },
        tokenizer: { type: "string" },
        "tito-family": { type: "string" },
        "latency-ms": { type: "string" },
        "token-ms": { type: "string" },
        "incremental-streaming": { type: "boolean" },
        "routed-experts-layers": { type: "string" },
        "routed-experts-top-k": { type: "string" },
        "routed-experts-bytes": { type: "string" },
        "always-routed-experts": { type: "boolean" },
        reasoning: { type: "boolean" },
        "prebuilt-tokens": { type: "string" },
        "prebuilt-turns": { type: "string" },
        "prebuilt-r3-last-bytes": { type: "string" },
        log: { type: "boolean" },
        help: { type: "boolean" },
      },
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
    routedExpertsLayers: integer(
      "routed-experts-layers",
      values["routed-experts-layers"],
      DEFAULT_ROUTING_SHAPE.layers,
    ),
    routedExpertsTopK: integer("routed-experts-top-k", values["routed-experts-top-k"], DEFAULT_ROUTING_SHAPE.topK),
    routedExpertsBytes: integer("routed-experts-bytes", values["routed-experts-bytes"], undefined),
    alwaysRoutedExperts: values["always-routed-experts"] ?? false,
    reasoning: values.reasoning ?? false,
    logger: values.log ?? false,
  };
  if (options.routedExpertsLayers! < 1 || options.routedExpertsTopK! < 1)
    fail("--routed-experts-layers and --routed-experts-top-k must be at least 1");
  if (values["prebuilt-tokens"] !== undefined) {
    const completionTokens = integer("prebuilt-tokens", values["prebuilt-tokens"], 1);
    if (completionTokens < 1) fail("--prebuilt-tokens must be at least 1");
    const turns = integer("prebuilt-turns", values["prebuilt-turns"], 0);
    const lastBytes = integer("prebuilt-r3-last-bytes", values["prebuilt-r3-last-bytes"], 0);
    if (lastBytes > 0 && turns < 1) fail("--prebuilt-r3-last-bytes needs --prebuilt-turns");
    options.prebuilt = {
      completionTokens,
      turns,
      // Grows linearly to lastBytes on turn T-1 (and stays there past it).
      routedExpertsBytesByTurn:
        lastBytes > 0 ? (k) => Math.round((lastBytes * Math.min(k + 1, turns)) / turns) : undefined,
    };
  } else if (values["prebuilt-turns"] !== undefined || values["prebuilt-r3-last-bytes"] !== undefined) {
    fail("--prebuilt-turns and --prebuilt-r3-last-bytes need --prebuilt-tokens");
  }
  return options;
}

const engine = await startSimEngine(parse(process.argv.slice(2))).catch((err: Error) => {
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
