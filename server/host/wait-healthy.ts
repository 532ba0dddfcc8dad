// Polls the router's GET /health until it answers 200 or the deadline passes (the last
// answer or error is the failure's message): how startSessionServer() knows the tree serves.
import { SessionServerFailedError } from "../../actors/index.ts";
import { httpText } from "./http-text.ts";

export async function waitHealthy(url: string, deadline: number): Promise<void> {
  let last = "";
  while (Date.now() < deadline) {
    try {
      const res = await httpText(`${url}/health`, { timeoutMs: 5_000 });
      if (res.status === 200) return;
      last = `${res.status} ${res.text}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new SessionServerFailedError(`session server did not become healthy: ${last}`);
}
