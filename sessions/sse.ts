// The event-stream framing of a streamed chat turn (`stream: true`), shared by the engine
// adapters that write its chunks and the session core that ends it: one `data: <json>`
// event per Buffer, `data: [DONE]` after a committed turn, and an error event in OpenAI's
// shape (`{"error": {message, type, param, code}}`, what the `openai` client throws on)
// when the turn fails after the stream began.
import { TitoError } from "./errors.ts";

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

/** The event that ends a stream whose turn failed (a coded error keeps its code and status). */
export function sseError(err: unknown): Buffer {
  const coded = err instanceof TitoError;
  const message = coded ? err.message : `internal error: ${err instanceof Error ? err.message : String(err)}`;
  return sseData({
    error: { message, type: coded ? err.code : "internal_error", param: null, code: coded ? err.status : 500 },
  });
}
