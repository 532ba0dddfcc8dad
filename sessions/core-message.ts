// What the session core takes and answers: plain values, never HTTP objects (session-core.ts),
// and a coded error as such an answer.
import type { CodedError } from "../buffers/coded-error.ts";

export interface CoreRequest {
  method: string;
  /** For proxy: the path after /sessions/{id}; for chat: "/v1/chat/completions". */
  path: string;
  /** Raw query string without "?", "" if none. */
  query: string;
  /** The client's request headers, lower-case names. */
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface CoreResponse {
  status: number;
  /** Never framing headers. */
  headers: Record<string, string>;
  /** A chunk list is written in order by the caller, never concatenated; a stream (records GET from the journal) is passed on as it is. */
  body: Buffer | Buffer[] | AsyncIterable<Buffer>;
}

export const JSON_HEADERS = { "content-type": "application/json" };
export const json = (status: number, value: unknown): CoreResponse => ({
  status,
  headers: { ...JSON_HEADERS },
  body: Buffer.from(JSON.stringify(value)),
});

/** A coded error as `{"error": message, "code": code}` with its class's status and headers (docs/http.md). */
export function errorResponse(err: CodedError): CoreResponse {
  const res = json(err.status, { error: err.message, code: err.code });
  Object.assign(res.headers, err.headers);
  return res;
}
