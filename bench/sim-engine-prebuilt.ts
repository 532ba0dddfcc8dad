// Pre-built replies for benchmarks, served by the simulated engine's raw-reply hook
// (SimEngineOptions.rawReplies, server/sim-engine/sim-engine.ts), in each engine API (the patched chat route, SGLang
// /generate, vLLM /v1/completions): the engine's answer to turn k is built once (before
// timing) as byte templates, so serving a request costs a byte scan of its body, a few
// small number buffers and a write: no JSON parse, no tokenizer, no logprob or base64
// work. The scans (sim-engine-prebuilt-scan.ts) find the turn key and the prompt ids.
// The turn key is the number of assistant messages in the chat body (turn k of a growing
// history carries k of them), and in the token APIs the number of assistant headers in
// the prompt ids minus the generation prompt's. `prompt_tokens` is the number of ids in
// the body's `input_ids` (chat, /generate) or `prompt` (completions), 0 without one; the
// completions reply copies the prompt array's bytes into `prompt_token_ids`.
// Replies are plain text: a fixed, sane token sequence of `completionTokens` ids ending in
// `<|im_end|>`, so the session server's own prefix check holds. The token-API replies
// carry what the session server's adapters ask for (logprobs, token ids); completions
// write `tokens` as `token_id:N` when the body sets `return_tokens_as_token_ids`.
// This file never parses a request body.
import assert from "node:assert";
import type { TokenizerFolder } from "../sessions/tokenizer-folder.ts";
import type { RawApi, RawReplier, RawReplies } from "../server/sim-engine/raw-replies.ts";
import { ROUTED_EXPERTS_MARKER, logprobAt } from "../server/sim-engine/sim-engine-reply.ts";
import { RoutedExpertsPayload } from "../server/sim-engine/sim-engine-payload.ts";
import { completionLogprobs } from "../server/sim-engine/sim-engine-completions.ts";
import { countAssistantTurns, flagSet, scanIdArray } from "./sim-engine-prebuilt-scan.ts";

export { countAssistantTurns } from "./sim-engine-prebuilt-scan.ts";

export interface PrebuiltOptions {
  /** completion_tokens of every reply (>= 1; the last id is `<|im_end|>`). */
  completionTokens: number;
  /** routed_experts size (bytes before base64) for turn k; 0 or absent: no routed_experts. */
  routedExpertsBytesByTurn?: (turn: number) => number;
  /** Build turns 0..turns-1 at start; later turns are built on first use and kept. */
  turns?: number;
}

type Variant = RawApi | "completions-ids";

const FILLER = " The quick brown fox jumps over the lazy dog while the engine keeps on talking.";

// Holes in a template: quoted markers become numbers or the prompt array; the routed
// marker sits inside a string and becomes the base64 payload.
const PROMPT_TOKENS = "__tito_prompt_tokens__";
const TOTAL_TOKENS = "__tito_total_tokens__";
const PROMPT_IDS = "__tito_prompt_ids__";
type Hole = "prompt_tokens" | "total_tokens" | "prompt_ids" | "routed";
const HOLES = new RegExp(`"(${PROMPT_TOKENS}|${TOTAL_TOKENS}|${PROMPT_IDS})"|${ROUTED_EXPERTS_MARKER}`, "g");
const HOLE_OF: Record<string, Hole> = {
  [PROMPT_TOKENS]: "prompt_tokens",
  [TOTAL_TOKENS]: "total_tokens",
  [PROMPT_IDS]: "prompt_ids",
};

interface Template {
  /** parts.length === holes.length + 1; a reply is parts[0], hole 0, parts[1], … */
  parts: Buffer[];
  holes: Hole[];
  routedBytes: number;
}

function template(body: unknown, routedBytes: number): Template {
  const json = JSON.stringify(body);
  const parts: Buffer[] = [];
  const holes: Hole[] = [];
  let from = 0;
  for (const match of json.matchAll(HOLES)) {
    parts.push(Buffer.from(json.slice(from, match.index), "utf8"));
    holes.push(match[1] ? HOLE_OF[match[1]] : "routed");
    from = match.index + match[0].length;
  }
  parts.push(Buffer.from(json.slice(from), "utf8"));
  return { parts, holes, routedBytes };
}

const EMPTY_IDS = Buffer.from("[]");

/** The simulated engine's rawReplies option for pre-built replies. */
export const prebuiltReplies =
  (options: PrebuiltOptions): RawReplies =>
  (folder, model) =>
    new PrebuiltReplies(folder, model, options);

export class PrebuiltReplies implements RawReplier {
  readonly #templates = new Map<string, Template>();
  readonly #payload = new RoutedExpertsPayload();
  readonly #options: PrebuiltOptions;
  readonly #model: string;
  readonly #folder: TokenizerFolder;
  readonly #completionIds: number[];
  readonly #content: string;
  readonly #imEnd: number;
  /** Qwen's assistant header ids, `<|im_start|>` `assistant`, when the tokenizer has them. */
  readonly #header?: readonly [number, number];

  constructor(folder: TokenizerFolder, model: string, options: PrebuiltOptions) {
    assert(
      Number.isInteger(options.completionTokens) && options.completionTokens >= 1,
      "prebuilt.completionTokens must be an integer >= 1",
    );
    const imEnd = folder.tokenId("<|im_end|>") ?? folder.tokenId(String(folder.config.eos_token ?? ""));
    assert(imEnd !== undefined, "the tokenizer has no <|im_end|> or eos token for pre-built replies");
    this.#options = options;
    this.#model = model;
    this.#folder = folder;
    this.#imEnd = imEnd;
    const imStart = folder.tokenId("<|im_start|>");
    const assistant = folder.encode("assistant");
    if (imStart !== undefined && assistant.length === 1) this.#header = [imStart, assistant[0]];
    const filler = folder.encode(FILLER);
    const body = Array.from({ length: options.completionTokens - 1 }, (_, i) => filler[i % filler.length]);
    this.#content = folder.decode(body);
    this.#completionIds = [...body, imEnd];
    const turns = options.turns ?? 0;
    const sizes = Array.from({ length: turns }, (_, k) => this.#sizeOf(k));
    this.#payload.chunks(Math.max(0, ...sizes)); // one encode of the largest payload; the rest are slices
    const variants: Variant[] = ["chat", "generate", "completions", "completions-ids"];
    for (let k = 0; k < turns; k++) for (const v of variants) this.#template(v, k);
  }

  #sizeOf(turn: number): number {
    return Math.max(0, Math.floor(this.#options.routedExpertsBytesByTurn?.(turn) ?? 0));
  }

  /** The reply bytes for a request body on a route. */
  reply(api: RawApi, body: Buffer): { chunks: Buffer[]; length: number } {
    const ids = scanIdArray(body, api === "completions" ? "prompt" : "input_ids", this.#header);
    const turn = api === "chat" ? countAssistantTurns(body) : Math.max(0, (ids?.headers ?? 0) - 1);
    const variant = api === "completions" && flagSet(body, "return_tokens_as_token_ids") ? "completions-ids" : api;
    const t = this.#template(variant, turn);
    const promptTokens = ids?.count ?? 0;
    const chunks: Buffer[] = [t.parts[0]];
    t.holes.forEach((hole, i) => {
      if (hole === "routed") chunks.push(...this.#payload.chunks(t.routedBytes));
      else if (hole === "prompt_ids") chunks.push(ids?.bytes ?? EMPTY_IDS);
      else {
        const n = hole === "prompt_tokens" ? promptTokens : promptTokens + this.#completionIds.length;
        chunks.push(Buffer.from(String(n), "latin1"));
      }
      chunks.push(t.parts[i + 1]);
    });
    return { chunks, length: chunks.reduce((n, c) => n + c.length, 0) };
  }

  #template(variant: Variant, turn: number): Template {
    const key = `${variant}:${turn}`;
    let built = this.#templates.get(key);
    if (built) return built;
    // Routing replay rides on the SGLang routes only.
    const size = variant === "chat" || variant === "generate" ? this.#sizeOf(turn) : 0;
    built = template(this.#body(variant, turn, size > 0), size);
    this.#templates.set(key, built);
    return built;
  }

  #body(variant: Variant, turn: number, routed: boolean): Record<string, unknown> {
    const ids = this.#completionIds;
    const created = Math.floor(Date.now() / 1000);
    if (variant === "completions" || variant === "completions-ids") {
      return {
        id: `cmpl-prebuilt-${turn}`,
        object: "text_completion",
        created,
        model: this.#model,
        choices: [
          {
            index: 0,
            text: this.#content,
            logprobs: completionLogprobs(this.#folder, ids, 0, variant === "completions-ids"),
            finish_reason: "stop",
            stop_reason: null,
            token_ids: ids,
            prompt_logprobs: null,
            prompt_token_ids: PROMPT_IDS,
          },
        ],
        service_tier: null,
        system_fingerprint: null,
        usage: {
          prompt_tokens: PROMPT_TOKENS,
          total_tokens: TOTAL_TOKENS,
          completion_tokens: ids.length,
          prompt_tokens_details: null,
        },
        kv_transfer_params: null,
      };
    }
    const finishReason = { type: "stop", matched: this.#imEnd };
    if (variant === "generate") {
      const meta: Record<string, unknown> = {
        id: `prebuilt-${turn}`,
        finish_reason: finishReason,
        prompt_tokens: PROMPT_TOKENS,
        input_token_logprobs: [],
        output_token_logprobs: ids.map((t, i) => [logprobAt(t, i), t, null]),
        completion_tokens: ids.length,
        cached_tokens: 0,
      };
      if (routed) meta.routed_experts = ROUTED_EXPERTS_MARKER;
      return { text: this.#content, output_ids: ids, meta_info: meta };
    }
    const meta: Record<string, unknown> = {
      id: `prebuilt-${turn}`,
      prompt_tokens: PROMPT_TOKENS,
      completion_tokens: ids.length,
      output_token_logprobs: ids.map((t, i) => [logprobAt(t, i), t]),
      finish_reason: finishReason,
    };
    if (routed) meta.routed_experts = ROUTED_EXPERTS_MARKER;
    return {
      id: `prebuilt-${turn}`,
      object: "chat.completion",
      created,
      model: this.#model,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: this.#content },
          logprobs: null,
          finish_reason: "stop",
          meta_info: meta,
        },
      ],
      usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: ids.length, total_tokens: TOTAL_TOKENS },
    };
  }
}
