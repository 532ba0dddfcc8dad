// Joins the session core to the transport: one request frame from the router becomes one
// core operation, and the core's {status, headers, body} goes back as the reply. The ops
// and their metadata are server/shard-protocol.ts; a frame that is not one of them is
// answered with a coded error (ShardRequestError), never a crash. The worker trusts the
// router's routing; it knows nothing of HTTP servers.
import type { Handler, IncomingBody, Reply } from "../../transport/index.ts";
import type { CoreRequest, CoreResponse, SessionCore } from "../../sessions/index.ts";
import { readShardRequest, type ListPage, type ShardReply, type ShardRequest } from "../shard-protocol.ts";
import { ShardRequestError } from "./errors.ts";
import type { WorkerMetrics } from "./worker-metrics.ts";

type ForwardRequest = Extract<ShardRequest, { method: string }>;

function toReply(res: CoreResponse): Reply {
  const meta: ShardReply = { status: res.status, headers: res.headers };
  return { meta, body: res.body };
}

function jsonResponse(status: number, value: unknown): CoreResponse {
  return {
    status,
    headers: { "content-type": "application/json; charset=utf-8" },
    body: Buffer.from(JSON.stringify(value)),
  };
}

async function coreRequest(request: ForwardRequest, body: IncomingBody): Promise<CoreRequest> {
  const chunks = await body.collect();
  return {
    method: request.method,
    path: request.path,
    query: request.query,
    headers: request.headers,
    body: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks),
  };
}

export function workerHandler(core: SessionCore, metrics: WorkerMetrics): Handler {
  return async (req) => {
    const read = readShardRequest(req.meta);
    // Checked before anything is counted, so a bad op never becomes a metrics label.
    if (!read.ok) throw new ShardRequestError(read.problem);
    const request = read.request;
    const track = (run: () => Promise<CoreResponse>) => metrics.track(request.op, run).then(toReply);
    switch (request.op) {
      case "metrics":
        return toReply(jsonResponse(200, await metrics.registry.getMetricsAsJSON()));
      case "health":
        return toReply(core.health());
      case "list": {
        const page: ListPage = core.list(request.after, request.limit);
        return toReply(jsonResponse(200, page));
      }
      case "create":
        return track(() => core.create(request.sessionId || undefined));
      case "get":
        return track(() => core.get(request.sessionId));
      case "delete":
        return track(() => core.delete(request.sessionId));
      case "chat":
        return track(async () => core.chat(request.sessionId, await coreRequest(request, req.body), req.signal));
      case "samples":
        return track(async () => core.samples(request.sessionId, await coreRequest(request, req.body)));
      case "proxy":
        return track(async () => core.proxy(request.sessionId, await coreRequest(request, req.body), req.signal));
      default:
        return unhandled(request);
    }
  };
}

// An op added to ShardRequest but not to the switch above makes `request` not `never`
// there, so the typecheck fails; at run time it would still be a coded error.
function unhandled(request: never): never {
  throw new ShardRequestError(`op ${String((request as { op: unknown }).op)} has no handler in this worker`);
}
