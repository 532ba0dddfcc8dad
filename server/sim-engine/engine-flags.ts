// The standalone simulated engine's flags and its --help text, in one place: engine-main.ts
// parses with them, and a doc test holds docs/engines.md to the same text.
import { DEFAULT_ROUTING_SHAPE } from "./sim-engine-payload.ts";

export const ENGINE_USAGE = `Usage: npm run engine -- [flags]

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
  --abort-at-token K            a request aborted by /abort_request, /pause_generation
                                (mode abort) or /update_weights_from_disk with
                                abort_all_requests keeps its first K tokens (default half)
  --incremental-streaming       /generate streams only what is new in each chunk
                                (SGLang's --incremental-streaming-output)
  --cumulative-logprobs         with --incremental-streaming: every logprob entry so far
                                in each chunk (SGLang before PR #21583)
  --max-model-len N             the context length /v1/models states and every route
                                enforces as its engine does (default 40960)
  --vllm-null-max-tokens MODE   /v1/completions with max_tokens null: 500 (released
                                vLLM, the default) or 16 (newer vLLM)
  --vllm-no-token-ids           /v1/completions as vLLM before 0.10.2: ids only as
                                "token_id:N" logprob tokens
  --vllm-routed-experts DTYPE   /v1/completions adds routed_experts as vLLM does: base64
                                .npy of uint8, uint16 or int32
  --routed-experts-layers N     routed_experts rows are per token (prompt + completion
                                - 1) of N layers × K experts, int32, as SGLang's
                                (default ${DEFAULT_ROUTING_SHAPE.layers})
  --routed-experts-top-k K      experts per token per layer (default ${DEFAULT_ROUTING_SHAPE.topK})
  --routed-experts-bytes N      a fixed routed_experts size instead, bytes before base64
                                (load tests; not per token: POST /samples refuses it)
  --always-routed-experts       add routed_experts even when the request does not ask
  --reasoning                   /generate and /v1/completions open with a <think> block
  --prefix-cache                keep a prefix cache keyed by the request's salt (SGLang
                                extra_key / cache_salt, vLLM cache_salt) and report its
                                hits (meta_info.cached_tokens)
  --prompt-tokens-details       with --prefix-cache, /v1/completions reports
                                usage.prompt_tokens_details.cached_tokens (vLLM's
                                --enable-prompt-tokens-details)
  --weight-version V            report meta_info.weight_version V on the SGLang routes
  --log                         fastify request logs on stderr
  --help                        this text

Prints "sim-engine ready url=http://HOST:PORT" on stdout once listening.`;

/** parseArgs options of `npm run engine`. */
export const ENGINE_FLAGS = {
  host: { type: "string" },
  port: { type: "string" },
  tokenizer: { type: "string" },
  "tito-family": { type: "string" },
  "latency-ms": { type: "string" },
  "token-ms": { type: "string" },
  "abort-at-token": { type: "string" },
  "incremental-streaming": { type: "boolean" },
  "cumulative-logprobs": { type: "boolean" },
  "max-model-len": { type: "string" },
  "vllm-null-max-tokens": { type: "string" },
  "vllm-no-token-ids": { type: "boolean" },
  "vllm-routed-experts": { type: "string" },
  "routed-experts-layers": { type: "string" },
  "routed-experts-top-k": { type: "string" },
  "routed-experts-bytes": { type: "string" },
  "always-routed-experts": { type: "boolean" },
  reasoning: { type: "boolean" },
  "prefix-cache": { type: "boolean" },
  "prompt-tokens-details": { type: "boolean" },
  "weight-version": { type: "string" },
  log: { type: "boolean" },
  help: { type: "boolean" },
} as const;
