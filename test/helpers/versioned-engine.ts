// An engine for the RL-loop tests: a small HTTP front in the test process over the gated
// simulated engine (server.ts startGatedEngine). It passes every request through, adds the
// engine's own policy version to each generation reply (`meta_info.weight_version`, as
// SGLang reports it) and notices when a caller cancels a request before its reply (our
// worker aborting its engine request). The simulated engine itself stays as it is.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { startGatedEngine, type GatedEngine } from "./server.ts";

export interface VersionedEngine {
  url: string;
  /** The simulated engine behind it: `hold()` gates the next chat requests, `requests` counts them. */
  sim: GatedEngine;
  /** The weight_version put into replies from now on (undefined: none). */
  version: string | undefined;
  /** Requests whose caller went away before the reply was sent. */
  readonly cancelled: number;
  /** Resolves at the next such cancellation. */
  nextCancel(): Promise<void>;
  close(): Promise<void>;
}

export async function startVersionedEngine(): Promise<VersionedEngine> {
  const sim = await startGatedEngine();
  let cancelled = 0;
  let onCancel: (() => void) | undefined;
  const state = { version: undefined as string | undefined };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const upstream = new AbortController();
    let answered = false;
    res.once("close", () => {
      if (answered) return;
      cancelled++;
      onCancel?.();
      upstream.abort();
    });
    let reply: Response;
    try {
      reply = await fetch(sim.url + req.url, {
        method: req.method,
        headers: { "content-type": "application/json" },
        body: req.method === "GET" ? undefined : Buffer.concat(chunks),
        signal: upstream.signal,
      });
    } catch {
      return; // cancelled
    }
    let text = await reply.text();
    if (reply.status === 200 && state.version !== undefined && req.method === "POST") {
      const body = JSON.parse(text);
      const meta = body.choices?.[0]?.meta_info ?? body.meta_info;
      if (meta) meta.weight_version = state.version;
      text = JSON.stringify(body);
    }
    answered = true;
    res.writeHead(reply.status, { "content-type": "application/json" }).end(text);
  };
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    sim,
    get version() {
      return state.version;
    },
    set version(v) {
      state.version = v;
    },
    get cancelled() {
      return cancelled;
    },
    nextCancel: () => new Promise<void>((resolve) => (onCancel = resolve)),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await sim.close();
    },
  };
}
