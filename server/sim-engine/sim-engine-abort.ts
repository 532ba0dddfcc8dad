// Engine-side aborts in the simulated engine, as SGLang has them: `POST /abort_request`
// with `{"rid": …}` or `{"abort_all": true}` (AbortReq, python/sglang/srt/managers/io_struct.py;
// the route answers 200 with no body: python/sglang/srt/entrypoints/http_server.py) ends the
// named requests in flight, which then answer 200 with an abort finish reason: SGLang's
// `{"type": "abort", "message", "status_code", "err_type"}` (FINISH_ABORT.to_json,
// python/sglang/srt/managers/schedule_batch.py @ 000eaffacf048e51b64d4d72985ef8f0b7054b39),
// the chat route's `finish_reason: "abort"`, vLLM's `"abort"` (RequestFinishedReason,
// vllm/v1/engine/__init__.py @ 0015f3f6a0e6ccca781c3f0b127101153c12ebbe). A request is
// in flight from its arrival until its reply is built; the reply is cut to half its tokens.

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

/** Marks a built reply (any of the three routes) as aborted, its completion cut to half. */
export function markAborted(route: string, response: Record<string, unknown>): void {
  if (route === "/generate") {
    const meta = response.meta_info as Record<string, unknown>;
    const ids = response.output_ids as number[];
    const keep = Math.floor(ids.length / 2);
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
  if (route === "/v1/chat/completions") {
    const meta = choice.meta_info as Record<string, unknown> | undefined;
    if (meta) meta.finish_reason = sglangAbort();
  }
}
