// Ending a session's work (docs/http.md, "Aborting a session"; docs/rl-loop.md,
// "Stragglers"). POST /sessions/{id}/abort (the admin or the session's own token) sends
// the abort-session op to the session's shard: the worker marks the session finished (later
// turns 409 TITO_ERR_SESSION_FINISHED, records and samples still served) and aborts its chat
// turn in flight (engine request cancelled, nothing committed, its client a 503). POST
// /admin/abort {"older_than_s": S} does it for every session with a chat turn in flight
// for longer than S seconds, the trainer's straggler cut, and lists the sessions it
// finished. The router knows which sessions have turns in flight, and since when, from
// the chat routes (InflightSessions); it never reads a session's bodies.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { requestShard, shardOf } from "../protocol/shard-protocol.ts";
import { InvalidAdminRequestError } from "./errors.ts";
import { adminBody } from "./router-admin.ts";
import type { Relay } from "./router-relay.ts";
import type { ShardLinks } from "./shard-links.ts";

/** How long /admin/abort waits for one shard to take one session's abort. */
const ABORT_TIMEOUT_MS = 5_000;

/** The sessions with chat turns in flight at the router, and when each turn started. */
export class InflightSessions {
  readonly #starts = new Map<string, number[]>();

  /** A chat turn of `sessionId` starts now; the returned function ends it (once). */
  enter(sessionId: string): () => void {
    const at = Date.now();
    const starts = this.#starts.get(sessionId);
    if (starts) starts.push(at);
    else this.#starts.set(sessionId, [at]);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const list = this.#starts.get(sessionId);
      if (!list) return;
      list.splice(list.indexOf(at), 1);
      if (list.length === 0) this.#starts.delete(sessionId);
    };
  }

  /** Sessions whose oldest turn in flight started more than `ms` ago. */
  olderThan(ms: number): string[] {
    const before = Date.now() - ms;
    const ids: string[] = [];
    for (const [id, starts] of this.#starts) if (starts[0]! <= before) ids.push(id);
    return ids;
  }
}

export interface AbortRoutesOptions {
  relay: Relay;
  inflight: InflightSessions;
}

export async function abortRoutes(app: FastifyInstance, { relay, inflight }: AbortRoutesOptions) {
  const links = relay.links;
  const n = links.size;
  app.post("/sessions/:id/abort", (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const sessionId = request.params.id;
    const op = { op: "abort-session", sessionId } as const;
    return relay.relay(request, reply, { shard: shardOf(sessionId, n), op });
  });

  app.post("/admin/abort", async (request: FastifyRequest, reply: FastifyReply) => {
    // A bad body throws InvalidAdminRequestError: the router's error handler answers it.
    const olderThanS = adminBody(request.body, ["older_than_s"]).older_than_s;
    if (typeof olderThanS !== "number" || !Number.isFinite(olderThanS) || olderThanS < 0)
      throw new InvalidAdminRequestError(
        `older_than_s must be a number of seconds >= 0, got ${JSON.stringify(olderThanS ?? null)}`,
      );
    const ids = inflight.olderThan(olderThanS * 1000);
    const outcomes = await Promise.all(ids.map((id) => abortOne(links, shardOf(id, n), id)));
    return reply.send({ finished: ids.filter((_id, i) => outcomes[i]) });
  });
}

/** Sends one session's abort to its shard; whether the worker finished it. */
async function abortOne(links: ShardLinks, shard: number, sessionId: string): Promise<boolean> {
  try {
    const signal = AbortSignal.timeout(ABORT_TIMEOUT_MS);
    const channel = await links.acquire(shard, signal);
    const res = await requestShard(channel, { op: "abort-session", sessionId }, undefined, signal);
    await res.body.collect();
    return res.status === 200;
  } catch {
    return false; // the shard is down: its turns failed with it, and the session may be gone
  }
}
