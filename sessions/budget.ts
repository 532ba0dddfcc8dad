// Token and turn budgets of a session (docs/http.md, "Budgets"). A session may be created
// with `{"max_total_tokens": N, "max_turns": T}`; the server's defaults
// (--max-session-tokens, --max-session-turns) apply where it gives none. A turn whose
// prompt leaves no room under the budget or under the engine's context length (when the
// engine says it), or that would be one turn too many, is a 400 TITO_ERR_BUDGET naming the
// numbers, before anything is sent or rolled back; otherwise the room left caps the turn's
// max_tokens. An engine that refuses a prompt as too long itself gets the same 400, so a
// rollout ends the trajectory instead of retrying it.
import { InvalidSessionBudgetError, SessionBudgetError } from "./errors.ts";

export interface SessionBudget {
  /** Prompt plus completion tokens of the whole trajectory; 0 or absent: none. */
  maxTotalTokens?: number;
  /** Committed assistant turns; 0 or absent: none. */
  maxTurns?: number;
}

const BUDGET_KEYS: Record<string, keyof SessionBudget> = {
  max_total_tokens: "maxTotalTokens",
  max_turns: "maxTurns",
};

/** The budget a create request's body asks for (an empty body: none), over the server's defaults. */
export function parseBudget(bytes: Buffer | undefined, defaults: SessionBudget): SessionBudget {
  if (bytes === undefined || bytes.length === 0) return { ...defaults };
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString("utf8"));
  } catch (err) {
    throw new InvalidSessionBudgetError(`the session body is not JSON: ${(err as Error).message}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new InvalidSessionBudgetError("the session body must be a JSON object");
  const budget = { ...defaults };
  for (const [key, value] of Object.entries(body)) {
    if (key === "trajectory") continue; // the session's mode: sessions/tree/tree-options.ts reads it
    const field = BUDGET_KEYS[key];
    if (field === undefined)
      throw new InvalidSessionBudgetError(
        `unknown key "${key}" (known: ${[...Object.keys(BUDGET_KEYS), "trajectory"].join(", ")})`,
      );
    if (value === null) continue;
    if (!Number.isSafeInteger(value) || (value as number) < 1)
      throw new InvalidSessionBudgetError(`${key} must be a positive integer, got ${JSON.stringify(value)}`);
    budget[field] = value as number;
  }
  return budget;
}

/**
 * Checks a planned turn against the budget and the engine's context length; returns the
 * most completion tokens the turn may ask for (undefined: no bound). `turns`: the session's
 * committed turns once a rollback the turn asks for is applied.
 */
export function checkBudget(
  budget: SessionBudget,
  contextLength: number | undefined,
  promptTokens: number,
  turns: number,
): number | undefined {
  if (budget.maxTurns && turns + 1 > budget.maxTurns)
    throw new SessionBudgetError(
      `the session has ${turns} turns and max_turns is ${budget.maxTurns}: no turn is left in its budget`,
    );
  let room: number | undefined;
  if (budget.maxTotalTokens) {
    room = budget.maxTotalTokens - promptTokens;
    if (room < 1)
      throw new SessionBudgetError(
        `the prompt has ${promptTokens} tokens and the session's max_total_tokens is ${budget.maxTotalTokens}: no room for a completion`,
      );
  }
  if (contextLength !== undefined) {
    const left = contextLength - promptTokens;
    if (left < 1)
      throw new SessionBudgetError(
        `the prompt has ${promptTokens} tokens and the engine's context length is ${contextLength}: no room for a completion`,
      );
    room = room === undefined ? left : Math.min(room, left);
  }
  return room;
}

/** `body` with max_tokens (and max_completion_tokens, when given) at most `cap`; the same object when nothing changes. */
export function capMaxTokens(body: Record<string, unknown>, cap: number): Record<string, unknown> {
  const fields = ["max_tokens", "max_completion_tokens"].filter((f) => body[f] !== undefined && body[f] !== null);
  if (fields.length === 0) return { ...body, max_tokens: cap };
  const over = fields.filter((f) => typeof body[f] !== "number" || (body[f] as number) > cap);
  if (over.length === 0) return body;
  const out = { ...body };
  for (const f of over) if (typeof out[f] === "number") out[f] = cap;
  return out;
}

// What the engines answer (status 400) to a prompt longer than the model's context:
// SGLang, test/srt/test_request_length_validation.py @ 0d607cf3fc6d6008ba536a520277cd352bec64c1
// asserts "is longer than the model's context length" (the prompt alone) and "Requested
// token count exceeds the model's maximum context" (prompt plus max_tokens); vLLM,
// vllm/v1/engine/input_processor.py @ 009daaeebfb0ce2813f970f2173ea9c8eee09092
// (_validate_prompt_len) "The decoder prompt (length N) is longer than the maximum model
// length of M", and its OpenAI layer's "This model's maximum context length is M tokens".
const OVERFLOW = [
  /is longer than the model's context length/i,
  /exceeds the model's maximum context/i,
  /is longer than the maximum model length/i,
  /maximum context length is \d+ tokens/i,
];

/**
 * An engine's error message, when it refuses a prompt as too long, as the budget error
 * (SGLang's /generate with `stream: true` says it in its first event: generate-stream.ts).
 */
export function overflowOf(message: string): SessionBudgetError | undefined {
  if (!OVERFLOW.some((re) => re.test(message))) return undefined;
  return new SessionBudgetError(`the engine refused the prompt as too long: ${message}`);
}

/** The engine's own "prompt too long" refusal, as a budget error carrying its message; undefined for any other reply. */
export function engineOverflow(status: number, body: Buffer[]): SessionBudgetError | undefined {
  if (status !== 400) return undefined;
  const text = Buffer.concat(body).toString("utf8");
  if (!OVERFLOW.some((re) => re.test(text))) return undefined;
  let message = text;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const inner = typeof parsed.error === "object" ? parsed.error?.message : (parsed.error ?? parsed.message);
    if (typeof inner === "string") message = inner;
  } catch {
    // not JSON: the text as it is
  }
  return new SessionBudgetError(`the engine refused the prompt as too long: ${message}`);
}
