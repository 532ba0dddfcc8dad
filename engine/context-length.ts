// The engine's context length, for session budgets (sessions/budget.ts): a turn whose
// prompt leaves no room under it is a 400 before anything is sent, and the room left caps
// its max_tokens. Every engine API states it in the same place, `GET /v1/models`:
// vLLM's ModelCard.max_model_len (served-model.ts cites it), and SGLang's own
// `available_models` answers the same ModelList with `max_model_len =
// tokenizer_manager.model_config.context_len` (python/sglang/srt/entrypoints/
// http_server.py @ 0025436eab0556737d615b36a4dd3e1e26e82f3d; its /get_model_info carries
// no length, and /get_server_info only the launch arguments, where context_length is null
// unless it was set). SGLang's checks the limit is held to (TokenizerManager.
// _validate_one_request, python/sglang/srt/managers/tokenizer_manager.py @
// 001067fffe33427bee0ed2f007fb7551a1d76b44): a prompt of context_len tokens or more is
// refused, and so is prompt + max_new_tokens above it; budget.ts refuses the first and caps
// the second to exactly the room.
import type { EngineTurnRequest } from "../sessions/engine-port.ts";
import type { CancelSignal } from "../buffers/cancel.ts";
import type { servedModel } from "./served-model.ts";

type Served = ReturnType<typeof servedModel>;

/**
 * vLLM's: the served-model read every turn needs anyway, so a failed read fails the turn
 * as the generation would.
 */
export function requiredContextLength(served: Served) {
  return async (headers: EngineTurnRequest["headers"], signal?: CancelSignal) =>
    (await served.info(headers, signal)).maxModelLen;
}

/** After a failed read, SGLang's length is not asked for again for this long (ms). */
export const OPTIONAL_RETRY_MS = 30_000;

/**
 * SGLang's: a hint, not a prerequisite. An engine (or a router in front of it) whose
 * /v1/models fails or states no length leaves the turn unchecked here; the engine's own
 * refusal of a prompt too long is still the same 400 (budget.ts engineOverflow). A failed
 * read is tried again only after OPTIONAL_RETRY_MS, not at every turn: an engine without
 * the route would otherwise cost every turn one more request on the chat path.
 */
export function optionalContextLength(served: Served, now: () => number = Date.now) {
  let retryAt = 0;
  return async (headers: EngineTurnRequest["headers"], signal?: CancelSignal) => {
    if (now() < retryAt) return undefined;
    try {
      return (await served.info(headers, signal)).maxModelLen;
    } catch {
      retryAt = now() + OPTIONAL_RETRY_MS; // served-model.ts forgets a failed read
      return undefined;
    }
  };
}
