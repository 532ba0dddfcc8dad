// The router's Fastify app: the only HTTP listener of the tree. Bodies are taken as raw
// bytes (every content type, JSON included) and never parsed here; route groups are
// Fastify plugins. Routes throw coded errors; one handler writes every error response
// (error-reply.ts), `{"error": message, "code": code}` with the class's status.
import Fastify, {
  LogController,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from "fastify";
import type { Logger } from "pino";
import fp from "fastify-plugin";
import { metricsRoutes, RouterMetrics } from "./router-metrics.ts";
import { sessionRoutes } from "./router-sessions.ts";
import { statusRoutes } from "./router-status.ts";
import type { RouterStatus } from "./supervision-view.ts";
import { errorHandler, notFound } from "./error-reply.ts";
import type { ShardLinks } from "./shard-links.ts";
import { authHook, DEFAULT_AGENT_PROXY_ALLOW, SessionTokens } from "./router-auth.ts";
import { abortRoutes, InflightSessions } from "./session-abort.ts";
import { Admission, admissionGauges } from "./admission.ts";
import { adminRoutes } from "./router-admin.ts";
import { RolloutDoor } from "./rollout-door.ts";
import { Relay } from "./router-relay.ts";
import type { SocketHandoff } from "./records-handoff.ts";
import { loadUiAssets, uiRoutes } from "./router-ui.ts";
import { chunksParser } from "./request-chunks.ts";

export interface RouterAppOptions {
  links: ShardLinks;
  status: RouterStatus;
  bodyLimit: number;
  /** The admin token (docs/security.md); without one every route is open. */
  authToken?: string;
  /** Engine paths a session token may GET through its proxy (default DEFAULT_AGENT_PROXY_ALLOW). */
  agentProxyAllow?: readonly string[];
  logger?: Logger | false;
  /** The rollout door chat turns pass (default: an open one that reports to nobody). */
  door?: RolloutDoor;
  /** Hands records GETs' sockets to their workers (router-main.ts, with the host's IPC); default: relay them. */
  handoff?: SocketHandoff;
  /** Bounds on chat turns at once and waiting (admission.ts); default unlimited. */
  admission?: { maxInflight: number; maxQueued: number };
}

/**
 * What Fastify gets for compiling route schemas: no route declares one (bodies are checked
 * where they are read, as docs/errors.md's codes say), so Fastify loads neither Ajv nor
 * fast-json-stringify, ~60 ms of each router start. A schema added later fails at startup.
 */
const noSchemas = () => () => {
  throw new Error("the router's routes declare no schemas (server/router/router-app.ts): check the input in the route");
};

/** Default --hold-timeout-ms, for a router app built without a door (tests). */
const DEFAULT_HOLD_TIMEOUT_MS = 600_000;

export function buildRouterApp(options: RouterAppOptions): FastifyInstance {
  const { links, status, bodyLimit, authToken } = options;
  const onError = errorHandler(bodyLimit);
  const app = Fastify({
    bodyLimit,
    loggerInstance: options.logger || undefined,
    logController: new LogController({ disableRequestLogging: true }),
    // Session ids and proxied engine paths are case-sensitive and may end in "/".
    routerOptions: { ignoreTrailingSlash: false, caseSensitive: true, maxParamLength: 256 },
    schemaController: { compilersFactory: { buildValidator: noSchemas, buildSerializer: noSchemas } },
    // Errors Fastify raises before routing, in our JSON shape, with the instance header.
    frameworkErrors: (err: FastifyError, request: FastifyRequest, reply: FastifyReply) =>
      onError(err, request, reply.header("x-tito-instance", status.instanceId)),
  } as never) as unknown as FastifyInstance;

  app.removeAllContentTypeParsers();
  // Bodies as the chunks they came in (request-chunks.ts): relayed as they are, never joined.
  app.addContentTypeParser("*", { bodyLimit }, chunksParser(bodyLimit));

  // Every response names the instance that made it (the id /health reports): behind a
  // balancer, a client can tell which instance holds its session.
  // A callback hook, not an async one: it runs on every request, and an async hook costs a promise and a tick.
  app.addHook("onRequest", (_request, reply, done) => {
    reply.header("x-tito-instance", status.instanceId);
    done();
  });

  const door = options.door ?? new RolloutDoor({ holdTimeoutMs: DEFAULT_HOLD_TIMEOUT_MS });
  const metrics = new RouterMetrics(status, door);
  door.observer = metrics.rollout;
  const tokens = authToken ? new SessionTokens(authToken) : undefined;
  // The viewer's static files (router-ui.ts) hold no data: they load without a token, and the page asks for it.
  const ui = loadUiAssets();
  if (authToken) {
    const policy = {
      adminToken: authToken,
      agentProxyAllow: options.agentProxyAllow ?? DEFAULT_AGENT_PROXY_ALLOW,
      openPaths: new Set(ui.keys()),
    };
    const countRefusal = (route: string, code: 401 | 403) => metrics.authRefusals.inc({ route, status: String(code) });
    app.addHook("onRequest", authHook(policy, countRefusal));
  }

  app.setNotFoundHandler((request, reply) => onError(notFound(request), request, reply));
  app.setErrorHandler(onError);

  // fastify-plugin: the metrics hook must see every route, not only its own plugin's.
  app.register(fp(metricsRoutes), { links, metrics });
  app.register(statusRoutes, { links, status });
  const inflight = new InflightSessions();
  const bounds = options.admission ?? { maxInflight: 0, maxQueued: 0 };
  const admission = new Admission({ ...bounds, held: () => door.status().held });
  admissionGauges(metrics.set, admission);
  const relay = new Relay({ links, metrics, door, handoff: options.handoff });
  app.register(sessionRoutes, { relay, tokens, inflight, admission });
  app.register(abortRoutes, { relay, inflight });
  app.register(adminRoutes, { door, links });
  app.register(uiRoutes, { assets: ui });
  return app;
}
