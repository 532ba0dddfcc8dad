// Partial rollouts (`--on-engine-abort resume`, docs/rl-loop.md "Partial rollouts"): an
// adapter wrapped so that a generation the engine aborts (a weight update with SGLang's
// `abort_all_requests` or `/pause_generation` mode `abort`, vLLM's `pause_generation(mode=
// "abort")`) is not lost. The aborted reply's ids and logprobs (SGLang returns them since
// sglang#11673; vLLM's abort output carries what was generated, vllm issue #22197) are
// kept; once the rollout door lets it (`door`: it waits while the server is paused), the
// engine is asked again with the turn's prompt followed by every id generated so far and
// the rest of the token budget (the client's max_tokens minus what was generated: verl
// #7207), as often as it aborts. The turn is then one completion: all parts' ids and the
// last reply's, its message parsed from the whole text by the session's family, as the
// token-level APIs do (token-reply.ts), on every engine API. A streamed turn is generated
// whole and then sent as one stream (streamWhole), so the client never sees a part twice.
// Nothing is committed here: the core commits the one turn, or nothing.
import type { Engine, EngineCompletion, EngineTurn, EngineTurnRequest, ResumedPart } from "../sessions/engine-port.ts";
import { EngineAbortedError } from "../sessions/errors.ts";
import { idsBytes } from "../sessions/ids-text.ts";
import type { CancelSignal } from "../buffers/cancel.ts";
import { streamWhole } from "./sglang-chat.ts";
import { buildChatReply } from "./token-reply.ts";

/** The rollout door as a worker sees it. */
export interface ResumeDoor {
  /** Resolves, with the weight version current then, once the door is open; rejects when `signal` aborts or the wait times out. */
  passage(signal?: CancelSignal): Promise<string | null>;
}

export interface ResumeOptions {
  door: ResumeDoor;
  /** The session tokenizer's decode (special tokens kept). */
  decode: (ids: readonly number[]) => string;
  /** Counts continuations sent (a metric); must not throw. */
  onResume?: () => void;
}

const budgetKeys = ["max_completion_tokens", "max_tokens"] as const;

/** The client's token budget, when it set one. */
function budgetOf(body: Record<string, unknown>): number | undefined {
  for (const key of budgetKeys) if (typeof body[key] === "number") return body[key] as number;
  return undefined;
}

export function resumingEngine(inner: Engine, options: ResumeOptions): Engine {
  return {
    ...inner,
    api: inner.api,
    contextLength: inner.contextLength?.bind(inner),
    async generate(turn: EngineTurnRequest): Promise<EngineTurn> {
      const body: Record<string, unknown> = { ...turn.body, stream: false };
      delete body.stream_options;
      const whole: EngineTurnRequest = { ...turn, body, clientBytes: Buffer.from(JSON.stringify(body)), stream: false };
      const done = await generateResuming(inner, whole, options);
      return turn.stream === true && done.ok ? streamWhole(done as EngineCompletion, turn.body) : done;
    },
    proxy: (req) => inner.proxy(req),
    close: () => inner.close(),
  };
}

async function generateResuming(inner: Engine, turn: EngineTurnRequest, options: ResumeOptions): Promise<EngineTurn> {
  const parts: ResumedPart[] = [];
  const budget = budgetOf(turn.body);
  let request = turn;
  let version = turn.weightVersion ?? null;
  for (;;) {
    let res: EngineTurn;
    try {
      res = await inner.generate(request);
    } catch (err) {
      if (!(err instanceof EngineAbortedError) || err.partial === undefined) throw err;
      parts.push({ completionIds: err.partial.ids, logprobs: err.partial.logprobs, weightVersion: version });
      const generated = parts.reduce((n, p) => n + p.completionIds.length, 0);
      // Aborted on its last allowed token: nothing is left to ask for, and a cut turn is no completion.
      if (budget !== undefined && budget - generated < 1) throw err;
      version = await options.door.passage(turn.signal);
      request = continuation(turn, parts, budget === undefined ? undefined : budget - generated, version);
      options.onResume?.();
      continue;
    }
    if (!res.ok || parts.length === 0) return res;
    return merged(turn, res as EngineCompletion, parts, version, options);
  }
}

/** The turn's request again, its prompt followed by what was generated, with the rest of the budget. */
function continuation(
  turn: EngineTurnRequest,
  parts: readonly ResumedPart[],
  remaining: number | undefined,
  version: string | null,
): EngineTurnRequest {
  const promptIds = [...Array.from(turn.promptIds), ...parts.flatMap((p) => p.completionIds)];
  const body = { ...turn.body };
  if (remaining !== undefined) for (const key of budgetKeys) if (typeof body[key] === "number") body[key] = remaining;
  return {
    ...turn,
    body,
    clientBytes: Buffer.from(JSON.stringify(body)),
    promptIds,
    promptBytes: idsBytes(promptIds),
    weightVersion: version,
    // Under `turn` a continuation's prefix (prompt and the parts) is prefilled by this version's
    // weights: the first version's salt would let the engine reuse KV the old weights computed.
    cacheSalt: turn.cacheSaltFollowsVersion ? version || undefined : turn.cacheSalt,
  };
}

/** One completion out of the parts and the last reply. */
function merged(
  turn: EngineTurnRequest,
  last: EngineCompletion,
  parts: ResumedPart[],
  version: string | null,
  options: ResumeOptions,
): EngineCompletion {
  const completionIds = [...parts.flatMap((p) => p.completionIds), ...last.completionIds];
  const reply = JSON.parse(Buffer.concat(last.clientBody).toString("utf8")) as {
    model?: unknown;
    choices?: Array<{ finish_reason?: unknown; matched_stop?: unknown }>;
  };
  const choice = reply.choices?.[0];
  const finish = choice?.finish_reason === "length" ? "length" : "stop";
  // The engines leave a matched stop token out of the text (token-reply.ts reads it so).
  const stops = new Set(turn.family.stopTokens);
  const lastId = completionIds.at(-1);
  const trimmed =
    finish === "stop" && lastId !== undefined && stops.has(options.decode([lastId]))
      ? completionIds.slice(0, -1)
      : completionIds;
  const tools = Array.isArray(turn.body.tools) ? turn.body.tools : undefined;
  const built = buildChatReply(
    turn.family,
    {
      text: trimmed.length === 0 ? "" : options.decode(trimmed),
      completionIds,
      finish,
      matchedStop: typeof choice?.matched_stop === "string" ? choice.matched_stop : undefined,
      promptTokens: turn.promptIds.length,
      model: typeof reply.model === "string" ? reply.model : typeof turn.body.model === "string" ? turn.body.model : "",
    },
    { tools, kwargs: turn.templateKwargs },
  );
  return {
    ...last,
    completionIds,
    message: built.message,
    clientBody: built.clientBody,
    headers: { "content-type": "application/json" },
    resumed: { parts, weightVersion: version },
  };
}
