// The token-level "model" behind the stock engine APIs (SGLang /generate, vLLM
// /v1/completions): from prompt ids to completion ids, the way an engine produces them.
// Owns reading a prompt from its ids (decoded, then the same facts and tool choice as the
// chat route), the completion text in Qwen's format (ended by the model family's stop token) (optional reasoning, a tool call or a
// sentence, or a structured-output JSON value), the per-token stop checks (stop token,
// stop strings, max tokens, in each engine's order), the text an engine reports, and the
// request checks both token routes share (BadRequest is the 400 a route answers in its
// engine's error shape).
// It never touches HTTP and keeps no state: the same prompt and limits give the same ids.
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { continues, splitPartial } from "./sim-engine-continue.ts";
import { factsFromText, hashIds, planReply, pyJson, sampleJson, toolsFromText } from "./sim-engine-reply.ts";

/** Where generation stops, checked after every token. */
export interface Limits {
  /** Max completion tokens; undefined: no limit. */
  maxTokens?: number;
  stop: readonly string[];
  stopTokenIds: ReadonlySet<number>;
  /** A structured-output constraint: the completion is one JSON value that fits this schema. */
  schema?: unknown;
  /**
   * SGLang checks max_new_tokens before the stop token and stop strings (a stop token that
   * lands on the last allowed position ends as `length`); vLLM checks the stop token first
   * and lets a stop string win over the length cap.
   */
  lengthFirst: boolean;
}

export type Finish =
  | { type: "eos"; id: number }
  | { type: "stop_token"; id: number }
  | { type: "stop_str"; matched: string }
  | { type: "length" };

export interface Completion {
  /** The generated ids, the stop token included when one ended generation. */
  ids: number[];
  finish: Finish;
  /** Ids of a partial completion the prompt already ended with (sim-engine-continue.ts): positions start there. */
  offset?: number;
}

/** The stop token when the model family names none: Qwen's end of turn, else the tokenizer's eos. */
export function eosIdOf(folder: TokenizerFolder): number | undefined {
  return folder.tokenId("<|im_end|>") ?? folder.tokenId(String(folder.config.eos_token ?? ""));
}

const THINK_END = "</think>\n\n";

/**
 * The completion text for a prompt, without the stop token. The reply choice is the chat
 * route's (planReply over the decoded prompt, tools read from the prompt itself); with
 * `reasoning`, a `<think>` block comes first unless the prompt already closed one (Qwen3
 * with thinking disabled ends its generation prompt with an empty think block).
 */
export function completionText(
  folder: TokenizerFolder,
  promptIds: readonly number[],
  schema: unknown,
  reasoning: boolean,
): string {
  const prompt = folder.decode(promptIds);
  const facts = { ids: promptIds, tools: toolsFromText(prompt), ...factsFromText(prompt) };
  let text: string;
  let thought: string;
  if (schema !== undefined) {
    text = pyJson(sampleJson(schema));
    thought = "The answer must be JSON that fits the schema.";
  } else {
    const plan = planReply(facts);
    text = plan.text;
    thought = plan.tool ? `I should call ${plan.tool.name} first.` : `I can answer turn ${facts.turn + 1} directly.`;
  }
  if (!reasoning || prompt.endsWith(THINK_END)) return text;
  const step = (hashIds(promptIds) % 3) + 1;
  return `<think>\n${thought} Step ${step} of the plan is clear.\n</think>\n\n${text}`;
}

function firstStop(text: string, stop: readonly string[]): string | undefined {
  let best: string | undefined;
  let at = Infinity;
  for (const s of stop) {
    const i = s ? text.indexOf(s) : -1;
    if (i >= 0 && i < at) [best, at] = [s, i];
  }
  return best;
}

/**
 * Generates the completion token by token: the ids are exactly the tokenizer's ids of the
 * completion text followed by the stop token (`stopId`: the model family's), cut where the
 * first check fires.
 */
export function generate(
  folder: TokenizerFolder,
  promptIds: readonly number[],
  limits: Limits,
  reasoning = false,
  stopId = eosIdOf(folder),
): Completion {
  const eos = stopId;
  const planned = (ids: readonly number[]) => {
    const out = folder.encode(completionText(folder, ids, limits.schema, reasoning));
    if (eos !== undefined) out.push(eos);
    return out;
  };
  // A prompt that ends with the start of its own completion continues it (a resumed request).
  const { base, partial } = splitPartial(folder, promptIds);
  let all = partial.length > 0 ? planned(base) : [];
  const offset = continues(all, partial) ? partial.length : 0;
  all = offset > 0 ? all.slice(offset) : planned(promptIds);
  const max = limits.maxTokens;
  if (max !== undefined && max <= 0) return { ids: [], finish: { type: "length" } };
  const upTo = (n: number, finish: Finish): Completion => ({ ids: all.slice(0, n), finish, offset });
  for (let n = 1; n <= all.length; n++) {
    const last = all[n - 1];
    const atLimit = max !== undefined && n >= max;
    if (limits.lengthFirst && atLimit) return upTo(n, { type: "length" });
    if (last === eos) return upTo(n, { type: "eos", id: last });
    if (limits.stopTokenIds.has(last)) return upTo(n, { type: "stop_token", id: last });
    // Stop strings are matched on the decoded text so far (only when asked: a decode per token).
    const matched = limits.stop.length > 0 ? firstStop(folder.decode(all.slice(0, n)), limits.stop) : undefined;
    if (matched !== undefined) return upTo(n, { type: "stop_str", matched });
    if (atLimit) return upTo(n, { type: "length" });
  }
  // Only without a stop token (a tokenizer with no eos): the text ran out.
  return { ids: all, finish: { type: "length" }, offset };
}

/**
 * The text an engine reports for a completion. Both engines leave a matched stop token
 * out of the text (the id stays in the ids) and cut the text before a matched stop string,
 * unless asked to keep it (SGLang `no_stop_trim`, vLLM `include_stop_str_in_output`: the
 * stop token is then decoded too, and the text runs to the end of the stop string).
 * `skipSpecial` drops special tokens from the decode, as both engines do by default.
 */
export function reportedText(
  folder: TokenizerFolder,
  completion: Completion,
  skipSpecial: boolean,
  keepStop: boolean,
): string {
  const { finish } = completion;
  let ids = completion.ids;
  if ((finish.type === "eos" || finish.type === "stop_token") && !keepStop) ids = ids.slice(0, -1);
  if (skipSpecial) ids = ids.filter((id) => !folder.specialTokenIds.has(id));
  // The tokenizer refuses to decode nothing (a continuation that is only the stop token).
  const text = ids.length === 0 ? "" : folder.decode(ids);
  if (finish.type !== "stop_str") return text;
  const at = text.indexOf(finish.matched);
  if (at < 0) return text;
  return text.slice(0, keepStop ? at + finish.matched.length : at);
}

/** `stop` as both engines accept it: a string, a list of strings, or nothing. */
export function stopList(stop: unknown, field: string): string[] {
  if (stop === undefined || stop === null) return [];
  if (typeof stop === "string") return [stop];
  if (Array.isArray(stop) && stop.every((s) => typeof s === "string")) return stop;
  throw new BadRequest(`${field} must be a string or a list of strings`);
}

/**
 * `k` deterministic alternatives to a sampled token, each less likely than it (the sim's
 * sampled token is always the top one). Ids are distinct and within [0, id + k].
 */
export function alternatives(id: number, logprob: number, k: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let j = 1; j <= k; j++)
    out.push([id >= j ? id - j : id + j, Math.round((logprob - 0.25 - j / 2) * 1000) / 1000]);
  return out;
}

/** A 400 the route's error handler turns into the engine's own error shape. */
export class BadRequest extends Error {
  readonly statusCode = 400;
}

/** The prompt ids of a request: token ids as given, or a text prompt tokenized (both engines accept either). */
export function promptIdsOf(folder: TokenizerFolder, prompt: unknown, field: string): number[] {
  if (Array.isArray(prompt) && prompt.length === 0) throw new BadRequest(`${field} is empty`);
  if (typeof prompt === "string") return folder.encode(prompt);
  if (Array.isArray(prompt) && prompt.every((x) => Number.isInteger(x) && x >= 0)) return prompt as number[];
  if (Array.isArray(prompt)) throw new BadRequest(`${field}: batches are not supported by the simulated engine`);
  throw new BadRequest(`the request needs ${field}`);
}
