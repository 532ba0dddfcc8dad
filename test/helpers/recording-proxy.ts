// A plain HTTP proxy in front of the engine that records every request tito-server sends
// it (URL, headers, body), then forwards it: what the engine saw, for tests that check no
// credential reaches it.
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";

export interface Upstream {
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Starts the proxy to `target`; every request it forwards is pushed on `upstream`. */
export function startRecorder(target: string, upstream: Upstream[]): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      upstream.push({ url: req.url ?? "", headers: req.headers, body: body.toString("utf8") });
      const out = httpRequest(target + (req.url ?? "/"), { method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      out.on("error", () => res.destroy());
      out.end(body);
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}
