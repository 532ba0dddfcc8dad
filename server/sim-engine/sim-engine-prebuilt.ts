// Pre-built replies for benchmarks: the engine's answer to turn k is a byte list built
// once (before timing), so serving a request costs a byte scan of the request body and
// a write — no JSON parse, no tokenizer, no logprob or base64 work.
// The turn key is the number of `"role": "assistant"` entries in the request body
// (turn k of a growing history carries k of them). Replies are plain text: a fixed,
// sane token sequence of `completionTokens` ids ending in `<|im_end|>`, so the session
// server's own prefix check holds. `prompt_tokens` is reported as 0 (counting would
// mean parsing). This file never parses a request body.
import assert from "node:assert";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { ROUTED_EXPERTS_MARKER, logprobAt } from "./sim-engine-reply.ts";
import { RoutedExpertsPayload, responseChunks } from "./sim-engine-payload.ts";

export interface PrebuiltOptions {
  /** completion_tokens of every reply (>= 1; the last id is `<|im_end|>`). */
  completionTokens: number;
  /** routed_experts size (bytes before base64) for turn k; 0 or absent: no routed_experts. */
  routedExpertsBytesByTurn?: (turn: number) => number;
  /** Build turns 0..turns-1 at start; later turns are built on first use and kept. */
  turns?: number;
}

const FILLER = " The quick brown fox jumps over the lazy dog while the engine keeps on talking.";

const ROLE = Buffer.from('"role"');
const ASSISTANT = Buffer.from('"assistant"');

function isSpace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

/** Counts `"role"<ws>:<ws>"assistant"` in raw JSON bytes without parsing them. */
export function countAssistantTurns(body: Buffer): number {
  let count = 0;
  for (let at = body.indexOf(ASSISTANT); at >= 0; at = body.indexOf(ASSISTANT, at + ASSISTANT.length)) {
    let i = at - 1;
    while (isSpace(body[i])) i--;
    if (body[i] !== 0x3a /* : */) continue;
    i--;
    while (isSpace(body[i])) i--;
    const start = i - ROLE.length + 1;
    if (start >= 0 && body.compare(ROLE, 0, ROLE.length, start, i + 1) === 0) count++;
  }
  return count;
}

export class PrebuiltReplies {
  readonly #byTurn = new Map<number, { chunks: Buffer[]; length: number }>();
  readonly #payload = new RoutedExpertsPayload();
  readonly #options: PrebuiltOptions;
  readonly #model: string;
  readonly #completionIds: number[];
  readonly #content: string;
  readonly #imEnd: number;

  constructor(folder: TokenizerFolder, model: string, options: PrebuiltOptions) {
    assert(
      Number.isInteger(options.completionTokens) && options.completionTokens >= 1,
      "prebuilt.completionTokens must be an integer >= 1",
    );
    const imEnd = folder.tokenId("<|im_end|>") ?? folder.tokenId(String(folder.config.eos_token ?? ""));
    assert(imEnd !== undefined, "the tokenizer has no <|im_end|> or eos token for pre-built replies");
    this.#options = options;
    this.#model = model;
    this.#imEnd = imEnd;
    const filler = folder.encode(FILLER);
    const body = Array.from({ length: options.completionTokens - 1 }, (_, i) => filler[i % filler.length]);
    this.#content = folder.decode(body);
    this.#completionIds = [...body, imEnd];
    const turns = options.turns ?? 0;
    const sizes = Array.from({ length: turns }, (_, k) => this.#sizeOf(k));
    this.#payload.chunks(Math.max(0, ...sizes)); // one encode of the largest payload; the rest are slices
    for (let k = 0; k < turns; k++) this.reply(k);
  }

  #sizeOf(turn: number): number {
    return Math.max(0, Math.floor(this.#options.routedExpertsBytesByTurn?.(turn) ?? 0));
  }

  /** The reply bytes for a turn, built on first use. */
  reply(turn: number): { chunks: Buffer[]; length: number } {
    let built = this.#byTurn.get(turn);
    if (built) return built;
    const ids = this.#completionIds;
    const size = this.#sizeOf(turn);
    const metaInfo: Record<string, unknown> = {
      id: `prebuilt-${turn}`,
      prompt_tokens: 0,
      completion_tokens: ids.length,
      output_token_logprobs: ids.map((t, i) => [logprobAt(t, i), t]),
      finish_reason: { type: "stop", matched: this.#imEnd },
    };
    if (size > 0) metaInfo.routed_experts = ROUTED_EXPERTS_MARKER;
    const body = {
      id: `prebuilt-${turn}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: this.#model,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: this.#content },
          logprobs: null,
          finish_reason: "stop",
          meta_info: metaInfo,
        },
      ],
      usage: { prompt_tokens: 0, completion_tokens: ids.length, total_tokens: ids.length },
    };
    const chunks = responseChunks(body, this.#payload, size);
    built = { chunks, length: chunks.reduce((n, c) => n + c.length, 0) };
    this.#byTurn.set(turn, built);
    return built;
  }
}
