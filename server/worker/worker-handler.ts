// Joins the session core to the transport: one request frame from the router becomes one
// core operation, and the core's {status, headers, body} goes back as the reply. The
// worker trusts the router's routing; it knows nothing of HTTP servers.
import type { Handler, IncomingRequest, Reply } from "../../transport/index.ts";
import type { CoreRequest, CoreResponse, SessionCore } from "../../sessions/index.ts";
import type { WorkerMetrics } from "./worker-metrics.ts";

function toReply(res: CoreResponse): Reply {
  return { meta: { status: res.status, headers: res.headers }, body: res.body };
}

function jsonResponse(status: number, value: unknown): CoreResponse {
  return {
    status,
    headers: { "content-type": "application/json; charset=utf-8" },
    body: Buffer.from(JSON.stringify(value)),
  };
}

async function coreRequest(req: IncomingRequest): Promise<CoreRequest> {
  const chunks = await req.body.collect();
  const meta = req.meta as Record<string, any>;
  return {
    method: String(meta.method ?? "GET"),
    path: String(meta.path ?? "/"),
    query: String(meta.query ?? ""),
    headers: (meta.headers ?? {}) as CoreRequest["headers"],
    body: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks),
  };
}

export function workerHandler(core: SessionCore, metrics: WorkerMetrics): Handler {
  return async (req) => {
    const op = String((req.meta as { op?: string }).op);
    if (op === "metrics") return toReply(jsonResponse(200, await metrics.registry.getMetricsAsJSON()));
    if (op === "health") return toReply(core.health());
    return metrics.track(op, () => operation(core, req)).then(toReply);
  };
}

async function operation(core: SessionCore, req: IncomingRequest): Promise<CoreResponse> {
  const meta = req.meta as { op?: string; sessionId?: string };
  const id = String(meta.sessionId ?? "");
  switch (meta.op) {
    case "create":
      return core.create(id || undefined);
    case "get":
      return core.get(id);
    case "delete":
      return core.delete(id);
    case "chat":
      return core.chat(id, await coreRequest(req), req.signal);
    case "samples":
      return core.samples(id, await coreRequest(req));
    case "proxy":
      return core.proxy(id, await coreRequest(req), req.signal);
    default:
      return jsonResponse(404, { error: `operation not supported by this worker: ${meta.op}` });
  }
}
