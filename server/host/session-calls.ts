// The embedding API's session calls that answer a new session (server/host/session-server.ts):
// what createSession() and fork() resolve with, read from the router's reply.
import { ForkSessionError } from "./errors.ts";
import { errorText, httpText } from "./http-text.ts";

export interface CreatedSession {
  sessionId: string;
  /** The session's shard (the `x-tito-shard` header). */
  shard: number;
  /** Present when the server has an admin token: the agent's bearer token for this session only. */
  sessionToken?: string;
}

/** A 200/201 reply of POST /sessions, PUT /sessions/{id} or POST /sessions/{id}/fork as a CreatedSession. */
export function createdSession(res: { text: string; headers: NodeJS.Dict<string | string[]> }): CreatedSession {
  const body = JSON.parse(res.text) as { session_id: string; session_token?: string };
  const created: CreatedSession = { sessionId: body.session_id, shard: Number(res.headers["x-tito-shard"]) };
  if (body.session_token !== undefined) created.sessionToken = body.session_token;
  return created;
}

/** POST {url}/sessions/{id}/fork {"at", "session_id"?} (docs/http.md); rejects with ForkSessionError on a non-201. */
export async function forkSession(
  url: string,
  headers: Record<string, string>,
  sessionId: string,
  at: number | string,
  opts: { sessionId?: string } = {},
): Promise<CreatedSession> {
  const body = JSON.stringify(opts.sessionId === undefined ? { at } : { at, session_id: opts.sessionId });
  const res = await httpText(`${url}/sessions/${encodeURIComponent(sessionId)}/fork`, {
    method: "POST",
    headers,
    body,
  });
  if (res.status !== 201) throw new ForkSessionError(sessionId, res.status, errorText(res.text));
  return createdSession(res);
}
