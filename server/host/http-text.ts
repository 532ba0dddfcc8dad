// The host's few HTTP calls to its own router (the embedding API's session and rollout
// helpers, the start-up health wait), answered as text.
import { request as httpRequest } from "node:http";

/** The JSON error message of a non-200 body, else its text. */
export function errorText(text: string): string {
  try {
    return (JSON.parse(text) as { error?: string }).error ?? text;
  } catch {
    return text; // not our JSON error body (a proxy in between?): keep the text
  }
}

/**
 * One request to the router, answered as text. node:http rather than fetch(): the host
 * otherwise sends nothing over HTTP, and the first fetch() loads Node's bundled undici and
 * compiles its WASM parser, which grows the host's RSS for no use here (docs/benchmark.md).
 */
export function httpText(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<{ status: number; text: string; headers: NodeJS.Dict<string | string[]> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      // Node 20's global agent closes a socket idle for 5 s (keepAlive, timeout 5000); a
      // drain pause or a big GET may well be quiet that long, so no timeout means none.
      { method: init.method ?? "GET", headers: init.headers, timeout: init.timeoutMs ?? 0 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), headers: res.headers }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer from ${url} within ${init.timeoutMs} ms`)));
    req.on("error", reject);
    req.end(init.body);
  });
}
