// The simulated engine's prefix cache: what a real engine's radix tree (SGLang) or block
// hashes (vLLM) would find already computed for a prompt, so that tests can see whether
// tito-server's requests hit or miss it. One cache per engine process, keyed by the request's
// salt and the token prefix: a request hits only what requests with the same salt left, as
// SGLang's `extra_key` / `cache_salt` and vLLM's `cache_salt` namespace their caches (SGLang
// GenerateReqInput and ChatCompletionRequest: python/sglang/srt/managers/io_struct.py @
// 001067fffe33427bee0ed2f007fb7551a1d76b44, python/sglang/srt/entrypoints/openai/protocol.py @
// 004c82e07d876f6e4a0ad6e15325706b0f478f1a; vLLM CompletionRequest:
// vllm/entrypoints/openai/completion/protocol.py @ 002032ee2b18e1f7bd924ec47b62504ba3866063).
//
// The model: a finished request leaves its prompt and completion cached in blocks of 16
// tokens (vLLM's default block size; SGLang caches token by token, which the model rounds
// down to the block); a prompt hits the longest cached run of whole blocks it starts with,
// at most all of its tokens but the last (an engine computes the last one's logits anew).
// Past `maxBlocks` the whole cache is dropped, as an engine under memory pressure evicts.
import { BadRequest } from "./sim-engine-completion.ts";

const BLOCK = 16;

export class PrefixCache {
  readonly #blocks = new Set<string>();
  readonly #maxBlocks: number;

  constructor(maxBlocks = 1_000_000) {
    this.#maxBlocks = maxBlocks;
  }

  /** Calls `visit` with the key of each whole block of `ids[0:limit]`, in order, until it returns false. */
  #walk(salt: string, ids: readonly number[], limit: number, visit: (key: string) => boolean): void {
    // Two 32-bit running hashes of the prefix (FNV-1a and a polynomial one) and its length.
    let a = 0x811c9dc5;
    let b = 7;
    for (let end = 0; end < limit; end++) {
      const id = ids[end]!;
      a = Math.imul(a ^ id, 0x01000193) >>> 0;
      b = (Math.imul(b, 31) + id + 1) >>> 0;
      if ((end + 1) % BLOCK === 0 && !visit(`${end + 1}:${a}:${b}:${salt}`)) return;
    }
  }

  /** The prompt's tokens found cached under `salt` (a multiple of the block, below the prompt's length). */
  lookup(salt: string, promptIds: readonly number[]): number {
    let hit = 0;
    this.#walk(salt, promptIds, promptIds.length - 1, (key) => {
      if (!this.#blocks.has(key)) return false;
      hit += BLOCK;
      return true;
    });
    return hit;
  }

  /** A finished request's prompt and completion, cached under `salt`. */
  insert(salt: string, promptIds: readonly number[], completionIds: readonly number[]): void {
    const ids = completionIds.length === 0 ? promptIds : [...promptIds, ...completionIds];
    if (this.#blocks.size + ids.length / BLOCK > this.#maxBlocks) this.#blocks.clear();
    this.#walk(salt, ids, ids.length, (key) => (this.#blocks.add(key), true));
  }

  /** What `lookup` finds for the prompt, then the request cached as `insert` does. */
  take(salt: string, promptIds: readonly number[], completionIds: readonly number[]): number {
    const hit = this.lookup(salt, promptIds);
    this.insert(salt, promptIds, completionIds);
    return hit;
  }

  /** Everything dropped (SGLang's /flush_cache). */
  flush(): void {
    this.#blocks.clear();
  }
}

interface ReportOptions {
  prefixCache?: boolean;
  weightVersion?: string;
  promptTokensDetails?: boolean;
}

/**
 * What the routes report of the cache and the weights, as each engine API does. Without
 * `prefixCache` nothing is cached and the replies are as before it (/generate's
 * `cached_tokens: 0`): the same request gives the same bytes, which many tests rely on.
 */
export class CacheReport {
  readonly cache = new PrefixCache();
  readonly #options: ReportOptions;

  constructor(options: ReportOptions) {
    this.#options = options;
  }

  #take(salt: string, promptIds: readonly number[], completion: readonly number[]): number | undefined {
    return this.#options.prefixCache ? this.cache.take(salt, promptIds, completion) : undefined;
  }

  /** SGLang's `meta_info.cached_tokens` (SGLang always has it), and `meta_info.weight_version` when the engine has one. */
  #sglang(meta: Record<string, unknown>, salt: string, promptIds: readonly number[], completion: readonly number[]) {
    const hit = this.#take(salt, promptIds, completion);
    if (hit !== undefined) meta.cached_tokens = hit;
    if (this.#options.weightVersion !== undefined) meta.weight_version = this.#options.weightVersion;
  }

  /** The chat route's reply (`choices[0].meta_info`). */
  chat(response: Record<string, unknown>, salt: string, promptIds: readonly number[], completion: readonly number[]) {
    const choice = (response.choices as Array<{ meta_info: Record<string, unknown> }>)[0]!;
    this.#sglang(choice.meta_info, salt, promptIds, completion);
  }

  /** A /generate reply (top-level `meta_info`). */
  generate(response: Record<string, unknown>, salt: string, promptIds: readonly number[]) {
    this.#sglang(response.meta_info as Record<string, unknown>, salt, promptIds, response.output_ids as number[]);
  }

  /**
   * A /v1/completions reply: `usage.prompt_tokens_details.cached_tokens` with
   * promptTokensDetails (vLLM's `--enable-prompt-tokens-details`; else vLLM reports null).
   * A reply without `token_ids` (vllmNoTokenIds) caches its prompt only.
   */
  completions(response: Record<string, unknown>, salt: string, promptIds: readonly number[]) {
    const completion = (response.choices as Array<{ token_ids?: number[] | null }>)[0]!.token_ids ?? [];
    const hit = this.#take(salt, promptIds, completion);
    if (hit !== undefined && this.#options.promptTokensDetails)
      (response.usage as Record<string, unknown>).prompt_tokens_details = { cached_tokens: hit };
  }
}

/**
 * A salt field as SGLang reads it for one request: a string, or null/absent; "" counts as
 * none; a list is a batch's, refused for a single request ("extra_key should be a string for a
 * single request", GenerateReqInput._normalize_single_inputs at the commit above); any other
 * type fails validation.
 */
function sglangSalt(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((v) => typeof v === "string"))
    throw new BadRequest(`${field} should be a string for a single request.`);
  throw new BadRequest(`${field}: Input should be a valid string`);
}

/** The cache namespace of an SGLang request (/generate or the chat route): its `cache_salt` and `extra_key`. */
export function sglangSaltOf(body: { cache_salt?: unknown; extra_key?: unknown }): string {
  return JSON.stringify([
    sglangSalt(body.cache_salt, "cache_salt") ?? null,
    sglangSalt(body.extra_key, "extra_key") ?? null,
  ]);
}

/** The cache namespace of a vLLM request: its `cache_salt`, a string of 1 to 1024 characters, or null/absent. */
export function vllmSaltOf(body: { cache_salt?: unknown }): string {
  const salt = body.cache_salt;
  if (salt === undefined || salt === null) return "";
  if (typeof salt !== "string") throw new BadRequest("cache_salt: Input should be a valid string");
  if (salt.length < 1 || salt.length > 1024)
    throw new BadRequest("cache_salt: String should have between 1 and 1024 characters");
  return `"${salt}`;
}
