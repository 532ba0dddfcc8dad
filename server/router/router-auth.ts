// Who may do what at the front door (docs/security.md). With an admin token configured,
// every route but the exact `/health` needs a bearer token:
// - the admin token (the rollout program, the trainer) may do everything;
// - a session token, minted by `POST /sessions` for that one session, may only chat on
//   its own session and GET the allowlisted, harmless engine routes through its proxy.
// A session token is `tst_` + base64url(HMAC-SHA256(key, session id)), the key itself an
// HMAC of the admin token: stateless, so the router alone verifies it, across restarts
// and on every instance that shares the admin token. Tokens are compared in constant time
// and never logged. Without an admin token nothing here runs.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { ForbiddenError, UnauthorizedError } from "./errors.ts";

const TOKEN_PREFIX = "tst_";
const KEY_LABEL = "tito-server session-token key v1";

/** The default of `--agent-proxy-allow`: engine routes that read nothing about other sessions and change nothing. */
export const DEFAULT_AGENT_PROXY_ALLOW: readonly string[] = ["/v1/models", "/health", "/get_model_info"];

export interface AuthPolicy {
  adminToken: string;
  /** Engine paths a session token may GET through its session's proxy (exact match, no query). */
  agentProxyAllow: readonly string[];
  /** URLs a GET or HEAD may fetch without a token, matched exactly (the viewer's static files: router-ui.ts). */
  openPaths?: ReadonlySet<string>;
}

/** Counts refusals by route and status (the metrics hook). */
export type RefusalCounter = (route: string, status: 401 | 403) => void;

const CHAT_ROUTE = "/sessions/:id/v1/chat/completions";
const MESSAGES_ROUTE = "/sessions/:id/v1/messages";
const PROXY_ROUTE = "/sessions/:id/*";
const ABORT_ROUTE = "/sessions/:id/abort";

function keyOf(adminToken: string): Buffer {
  return createHmac("sha256", adminToken).update(KEY_LABEL).digest();
}

/** Compares two secrets in constant time, whatever their lengths. */
function sameSecret(a: string, b: string): boolean {
  const da = createHash("sha256").update(a).digest();
  const db = createHash("sha256").update(b).digest();
  return timingSafeEqual(da, db) && a.length === b.length;
}

/** Mints and checks session tokens under one admin token. */
export class SessionTokens {
  readonly #key: Buffer;

  constructor(adminToken: string) {
    this.#key = keyOf(adminToken);
  }

  mint(sessionId: string): string {
    return TOKEN_PREFIX + createHmac("sha256", this.#key).update(sessionId).digest("base64url");
  }

  /** Whether `token` is the session token of `sessionId` (constant time in the token's bytes). */
  verify(token: string, sessionId: string): boolean {
    const expected = Buffer.from(this.mint(sessionId));
    const given = Buffer.from(token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}

const bearer = (request: FastifyRequest): string | undefined => {
  const header = request.headers.authorization;
  if (typeof header !== "string" || !header.startsWith("Bearer ")) return undefined;
  return header.slice("Bearer ".length);
};

/** The request's path without its query, as the client sent it. */
function pathOf(request: FastifyRequest): string {
  const url = request.raw.url ?? "/";
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

function mayDo(policy: AuthPolicy): string {
  const reads =
    policy.agentProxyAllow.length > 0 ? ` and GET /sessions/{its id}{${policy.agentProxyAllow.join(",")}}` : "";
  return `a session token may only POST /sessions/{its id}/v1/chat/completions (or /v1/messages) and /sessions/{its id}/abort${reads}`;
}

/** What a session token may do on this request: undefined when allowed, else why not. */
function sessionTokenRefusal(
  request: FastifyRequest,
  token: string,
  tokens: SessionTokens,
  policy: AuthPolicy,
): string | undefined {
  const route = request.routeOptions.url;
  const sessionId = (request.params as { id?: unknown } | undefined)?.id;
  const mayOnly = mayDo(policy);
  if (route === CHAT_ROUTE || route === MESSAGES_ROUTE || route === PROXY_ROUTE || route === ABORT_ROUTE) {
    if (typeof sessionId !== "string" || !tokens.verify(token, sessionId))
      return `this token is not valid for session ${String(sessionId)}; ${mayOnly}`;
    // An agent may end its own session's work (docs/http.md, "Aborting a session").
    if (route === CHAT_ROUTE || route === MESSAGES_ROUTE || route === ABORT_ROUTE) return undefined;
    const enginePath = pathOf(request).slice(`/sessions/${sessionId}`.length) || "/";
    if (request.method === "GET" && policy.agentProxyAllow.includes(enginePath)) return undefined;
    return `${request.method} ${enginePath} through the session proxy needs the admin token; ${mayOnly}`;
  }
  return `${request.method} ${route ?? pathOf(request)} needs the admin token; ${mayOnly}`;
}

/**
 * The onRequest hook that enforces the policy. Only a GET or HEAD of exactly `/health` or
 * one of `openPaths` (no query, no trailing slash) stays open: the test is on the URL the
 * client sent, not on the matched route, which `/health?x=1` would match too.
 */
export function authHook(policy: AuthPolicy, countRefusal?: RefusalCounter) {
  const tokens = new SessionTokens(policy.adminToken);
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const url = request.raw.url;
    if ((request.method === "GET" || request.method === "HEAD") && (url === "/health" || policy.openPaths?.has(url!)))
      return;
    const token = bearer(request);
    if (token !== undefined && sameSecret(token, policy.adminToken)) return;
    const route = request.routeOptions.url ?? "unmatched";
    let err: UnauthorizedError | ForbiddenError;
    if (token === undefined || !token.startsWith(TOKEN_PREFIX)) err = new UnauthorizedError();
    else {
      const refusal = sessionTokenRefusal(request, token, tokens, policy);
      if (refusal === undefined) return;
      err = new ForbiddenError(refusal);
    }
    countRefusal?.(route, err.status as 401 | 403);
    throw err; // the app's error handler writes it (error-reply.ts)
  };
}
