// The event-stream framing of a streamed chat turn (`stream: true`), shared by the engine
// adapters that write its chunks and the session core that ends it: one `data: <json>`
// event per Buffer, `data: [DONE]` after a committed turn, and an error event in OpenAI's
// shape (`{"error": {message, type, param, code}}`, what the `openai` client throws on)
// when the turn fails after the stream began.
import { CodedError } from "../buffers/coded-error.ts";
import { UpstreamAbortedError } from "./errors.ts";

/** Response headers of an event stream: no caching, and no buffering in a proxy in front (nginx). */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no",
};

/** One event carrying `value` as JSON. */
export const sseData = (value: unknown): Buffer => Buffer.from(`data: ${JSON.stringify(value)}\n\n`, "utf8");

/** The event that ends a stream whose turn was committed. */
export const sseDone = (): Buffer => Buffer.from("data: [DONE]\n\n", "latin1");

/**
 * The event that ends a stream whose turn failed. A coded error keeps its code and status;
 * an engine request aborted for a coded reason (a pause's abort-turns) says that reason.
 */
export function sseError(err: unknown): Buffer {
  const e = err instanceof UpstreamAbortedError && err.cause instanceof CodedError ? err.cause : err;
  if (e instanceof CodedError)
    return sseData({ error: { message: e.message, type: e.code, param: null, code: e.status } });
  const message = `internal error: ${e instanceof Error ? e.message : String(e)}`;
  return sseData({ error: { message, type: "internal_error", param: null, code: 500 } });
}
