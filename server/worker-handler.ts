// Joins the session core to the transport: one request frame from the router becomes one
// core operation, and the core's {status, headers, body} goes back as the reply. The
// worker trusts the router's routing; it knows nothing of HTTP servers.
import type { Handler, IncomingRequest, Reply } from "../transport/index.ts";
import type { CoreRequest, CoreResponse, SessionCore } from "../sessions/index.ts";

function toReply(res: CoreResponse): Reply {
  return { meta: { status: res.status, headers: res.headers }, body: res.body };
}

function jsonReply(status: number, value: unknown): Reply {
  return { meta: { status, headers: { "content-type": "application/json; charset=utf-8" } }, body: Buffer.from(JSON.stringify(value)) };
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

export function workerHandler(core: SessionCore): Handler {
  return async (req) => {
    const meta = req.meta as { op?: string; sessionId?: string };
    const id = String(meta.sessionId ?? "");
    switch (meta.op) {
      case "health":
        return toReply(core.health());
      case "create":
        return toReply(await core.create(id || undefined));
      case "get":
        return toReply(await core.get(id));
      case "delete":
        return toReply(await core.delete(id));
      case "chat":
        return toReply(await core.chat(id, await coreRequest(req), req.signal));
      case "proxy":
        return toReply(await core.proxy(id, await coreRequest(req), req.signal));
      default:
        return jsonReply(404, { error: `operation not supported by this worker: ${meta.op}` });
    }
  };
}
