// Engine-side aborts in the simulated engine, as SGLang has them: `POST /abort_request`
// with `{"rid": …}` or `{"abort_all": true}` (AbortReq, python/sglang/srt/managers/io_struct.py;
// the route answers 200 with no body: python/sglang/srt/entrypoints/http_server.py) ends the
// named requests in flight, which then answer 200 with an abort finish reason: SGLang's
// `{"type": "abort", "message", "status_code", "err_type"}` (FINISH_ABORT.to_json,
// python/sglang/srt/managers/schedule_batch.py @ 000eaffacf048e51b64d4d72985ef8f0b7054b39),
// the chat route's `finish_reason: "abort"`, vLLM's `"abort"` (RequestFinishedReason,
// vllm/v1/engine/__init__.py @ 0015f3f6a0e6ccca781c3f0b127101153c12ebbe). A request is
// in flight from its arrival until its reply is built; the reply keeps its first
// `abortAtToken` tokens (default half), the partial output SGLang returns since sglang#11673
// and vLLM's abort output carries.
// A weight update aborts them the same way: `POST /pause_generation {"mode": "abort"}` (mode
// "abort" is PauseGenerationReqInput's default; `/continue_generation` answers too) and
// `POST /update_weights_from_disk` with `abort_all_requests: true` (UpdateWeightFromDiskReqInput;
// both python/sglang/srt/managers/io_struct.py @ 001067fffe33427bee0ed2f007fb7551a1d76b44).
import type { FastifyInstance } from "fastify";

export interface AbortTicket {
  readonly rid: string | undefined;
  aborted: boolean;
}

export class AbortBoard {
  readonly #inFlight = new Set<AbortTicket>();

  enter(rid: unknown): AbortTicket {
    const ticket = { rid: typeof rid === "string" ? rid : undefined, aborted: false };
    this.#inFlight.add(ticket);
    return ticket;
  }

  leave(ticket: AbortTicket): void {
    this.#inFlight.delete(ticket);
  }

  /** `POST /abort_request`: marks the requests it names; returns how many. */
  abort(body: { rid?: unknown; abort_all?: unknown } | null | undefined): number {
    let n = 0;
    for (const ticket of this.#inFlight)
      if (body?.abort_all === true || (typeof body?.rid === "string" && ticket.rid === body.rid)) {
        ticket.aborted = true;
        n++;
      }
    return n;
  }
}

const ABORT_MESSAGE = "Abort in waiting queue";

/** SGLang's abort finish reason object. */
export const sglangAbort = () => ({ type: "abort", message: ABORT_MESSAGE, status_code: null, err_type: null });

/** The tokens an aborted reply of `n` keeps: `at` (below n), or half. */
export const abortKeep = (n: number, at: number | undefined) =>
  at === undefined ? Math.floor(n / 2) : Math.max(0, Math.min(at, n - 1));

/** Marks a built reply (any of the three routes) as aborted, its completion cut to `abortKeep` tokens. */
export function markAborted(route: string, response: Record<string, unknown>, at?: number): void {
  if (route === "/generate") {
    const meta = response.meta_info as Record<string, unknown>;
    const ids = response.output_ids as number[];
    const keep = abortKeep(ids.length, at);
    response.output_ids = ids.slice(0, keep);
    if (Array.isArray(meta.output_token_logprobs))
      meta.output_token_logprobs = meta.output_token_logprobs.slice(0, keep);
    meta.completion_tokens = keep;
    meta.finish_reason = sglangAbort();
    response.text = "";
    return;
  }
  const choice = (response.choices as Array<Record<string, unknown>>)[0];
  choice.finish_reason = "abort";
  const usage = response.usage as { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  if (route === "/v1/chat/completions") {
    const meta = choice.meta_info as Record<string, unknown> | undefined;
    if (!meta) return;
    meta.finish_reason = sglangAbort();
    const entries = meta.output_token_logprobs as unknown[];
    const keep = abortKeep(entries.length, at);
    meta.output_token_logprobs = entries.slice(0, keep);
    meta.completion_tokens = keep;
    choice.message = { role: "assistant", content: "" };
    Object.assign(usage, { completion_tokens: keep, total_tokens: usage.prompt_tokens + keep });
    return;
  }
  const ids = choice.token_ids as number[] | null;
  const logprobs = choice.logprobs as Record<string, unknown[]> | null;
  const n = ids?.length ?? usage.completion_tokens;
  const keep = abortKeep(n, at);
  if (ids) choice.token_ids = ids.slice(0, keep);
  if (logprobs) for (const key of Object.keys(logprobs)) logprobs[key] = logprobs[key]!.slice(0, keep);
  choice.text = "";
  Object.assign(usage, { completion_tokens: keep, total_tokens: usage.prompt_tokens + keep });
}

/** SGLang's `/abort_request` and the weight-update routes that abort what is in flight (see the top of this file). */
export function updateRoutes(app: FastifyInstance, aborts: AbortBoard): void {
  app.post("/abort_request", async (request, reply) => {
    aborts.abort(request.body as { rid?: unknown; abort_all?: unknown } | null);
    return reply.code(200).send();
  });
  app.post("/pause_generation", async (request) => {
    const mode = (request.body as { mode?: unknown } | null)?.mode ?? "abort";
    if (mode === "abort") aborts.abort({ abort_all: true });
    return { message: "Generation paused successfully.", status: "ok" };
  });
  app.post("/continue_generation", async () => ({ message: "Generation continued successfully.", status: "ok" }));
  app.post("/update_weights_from_disk", async (request) => {
    const body = request.body as { abort_all_requests?: unknown } | null;
    if (body?.abort_all_requests === true) aborts.abort({ abort_all: true });
    return { success: true, message: "Succeeded to update model weights.", num_paused_requests: 0 };
  });
}
