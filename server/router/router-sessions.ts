// The session routes of the router (docs/http.md), as one Fastify plugin. Each route
// only picks the owning shard from the session id and relays; the router never parses
// a request or reply body. POST /sessions mints the id first so it can route by it.
// Each route is one shard op (server/protocol/shard-protocol.ts); only the ops that hand the client's
// request to the session core (chat, samples, proxy) carry its method, path and headers.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { randomBytes } from "node:crypto";
import { shardOf, type ShardOp } from "../protocol/shard-protocol.ts";
import type { Relay } from "./router-relay.ts";
import { listSessions } from "./router-list.ts";
import type { SessionTokens } from "./router-auth.ts";
import type { InflightSessions } from "./session-abort.ts";
import { admitTurn, type Admission } from "./admission.ts";

/** The worker's reply header naming a fork's id (sessions/session-fork.ts FORK_ID_HEADER). */
const FORK_ID_HEADER = "x-tito-session-id";

/** A new session id: 32 lower-case hex characters. */
export function mintSessionId(): string {
  return randomBytes(16).toString("hex");
}

export interface SessionRoutesOptions {
  /** Relays to the shards (router-relay.ts), with the links, metrics, door and handoff it holds. */
  relay: Relay;
  /** With an admin token: POST /sessions answers the new session's token beside its id. */
  tokens?: SessionTokens;
  /** Told of every chat turn, for POST /admin/abort (session-abort.ts). */
  inflight?: InflightSessions;
  /** Bounds chat turns at once and waiting (admission.ts). */
  admission?: Admission;
}

const PROXY_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH"] as const;

function rawPathAndQuery(request: FastifyRequest, sessionId: string): { path: string; query: string } {
  const url = request.raw.url ?? "/";
  const q = url.indexOf("?");
  const pathname = q < 0 ? url : url.slice(0, q);
  const prefix = `/sessions/${sessionId}`;
  // Keep the client's own encoding of the rest of the path: the worker checks it.
  const at = pathname.indexOf(prefix);
  const rest = at < 0 ? "/" : pathname.slice(at + prefix.length) || "/";
  return { path: rest, query: q < 0 ? "" : url.slice(q + 1) };
}

export async function sessionRoutes(
  app: FastifyInstance,
  { relay, tokens, inflight, admission }: SessionRoutesOptions,
): Promise<void> {
  const { links, handoff } = relay;
  const n = links.size;
  type IdRequest = FastifyRequest<{ Params: { id: string } }>;
  const bySessionId =
    (op: Extract<ShardOp, "get" | "delete" | "tree">) => (request: IdRequest, reply: FastifyReply) => {
      const sessionId = request.params.id;
      const body = request.body as Buffer[] | undefined;
      return relay.relay(request, reply, { shard: shardOf(sessionId, n), op: { op, sessionId }, body });
    };
  // The records: the worker writes them to the client's socket itself when it can be handed over.
  const relayRecords = bySessionId("get");
  const records = (request: IdRequest, reply: FastifyReply) => {
    const ticket = handoff?.ticketFor(request);
    if (ticket === undefined) return relayRecords(request, reply);
    const sessionId = request.params.id;
    const op = { op: "get", sessionId, handoff: ticket } as const;
    return relay.relay(request, reply, { shard: shardOf(sessionId, n), op, ticket });
  };
  const forward =
    (op: Extract<ShardOp, "chat" | "samples" | "proxy">) => async (request: IdRequest, reply: FastifyReply) => {
      const sessionId = request.params.id;
      // A chat turn waits for its admission first; refused (429) or its client gone, it ends here.
      if (op === "chat" && admission && !(await admitTurn(admission, request, reply))) return reply;
      if (op === "chat" && inflight) reply.raw.once("close", inflight.enter(sessionId));
      const { path, query } = rawPathAndQuery(request, sessionId);
      const shardRequest = { op, sessionId, method: request.method, path, query, headers: request.headers };
      const body = request.body as Buffer[] | undefined;
      // Only chat turns reach the engine's generation: they alone pass the rollout door.
      return relay.relay(request, reply, { shard: shardOf(sessionId, n), op: shardRequest, body, turn: op === "chat" });
    };

  // The router knows the id, so it writes the created body itself (with the session token
  // when there is an admin token): no reply body is parsed. POST mints the id (200); PUT
  // takes the client's (201), which the worker checks (400 invalid, 409 exists).
  const create = (sessionId: string, created: number) => (request: FastifyRequest, reply: FastifyReply) => {
    const rewrite = (status: number) => {
      if (status !== 200) return undefined;
      const body: Record<string, string> = { session_id: sessionId };
      if (tokens) body.session_token = tokens.mint(sessionId);
      return { status: created, body: Buffer.from(JSON.stringify(body)) };
    };
    const op = { op: "create", sessionId } as const;
    // The body (a budget, or nothing) goes to the worker as it is.
    const body = request.body as Buffer[] | undefined;
    return relay.relay(request, reply, { shard: shardOf(sessionId, n), op, rewrite, body });
  };
  app.post("/sessions", (request, reply) => create(mintSessionId(), 200)(request, reply));
  // A fork lives on its parent's shard (sessions/session-fork.ts): the id minted for it
  // (used when the body names none) routes there; the worker parses the body and answers
  // the fork's id in a header, from which the router writes the body with a session token.
  app.post("/sessions/:id/fork", (request: IdRequest, reply) => {
    const sessionId = request.params.id;
    const shard = shardOf(sessionId, n);
    let forkId = mintSessionId();
    while (shardOf(forkId, n) !== shard) forkId = mintSessionId(); // n tries on average
    const op = { op: "fork", sessionId, forkId, shard, workers: n } as const;
    const rewrite = (status: number, headers: Record<string, string>) => {
      const id = headers[FORK_ID_HEADER];
      delete headers[FORK_ID_HEADER];
      if (status !== 201 || !tokens || id === undefined) return undefined;
      return { status, body: Buffer.from(JSON.stringify({ session_id: id, session_token: tokens.mint(id) })) };
    };
    return relay.relay(request, reply, { shard, op, rewrite, body: request.body as Buffer[] | undefined });
  });
  app.put("/sessions/:id", (request: IdRequest, reply) => create(request.params.id, 201)(request, reply));
  app.get("/sessions", listSessions(links));
  app.get("/sessions/:id", records);
  app.delete("/sessions/:id", bySessionId("delete"));
  app.post("/sessions/:id/v1/chat/completions", forward("chat"));
  // Anthropic Messages: a chat turn the worker answers in Anthropic's shapes (docs/agents.md).
  app.post("/sessions/:id/v1/messages", forward("chat"));
  app.post("/sessions/:id/samples", forward("samples"));
  app.get("/sessions/:id/tree", bySessionId("tree"));
  app.route({ method: [...PROXY_METHODS], url: "/sessions/:id/*", handler: forward("proxy") });
}
