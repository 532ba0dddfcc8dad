// Idle expiry and a streamed turn, with real processes (--session-idle-ttl-s 1): a session
// whose turn is still streaming (the engine held mid-stream, past the TTL) is not expired
// under it, though a session touched after the stream began is; the stream then ends with
// [DONE] and its turn is recorded.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call } from "../helpers/server.ts";

let engine: SimEngine;
let server: SessionServer;
let hold: Promise<void> | undefined;
let reached: () => void = () => {};

test.before(async () => {
  engine = await startSimEngine({
    onStreamChunk: (_route, index) => {
      if (index !== 3 || !hold) return;
      reached();
      return hold;
    },
  });
  server = await startSessionServer({
    engineUrl: engine.url,
    engineApi: "sglang-generate",
    workers: 1,
    sessionIdleTtlS: 1,
    logLevel: "warn",
  });
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

/** Lists the sessions (which touches none of them) until `id` is gone; a bounded loop. */
async function untilGone(id: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const listed = await call<{ sessions: string[] }>(server.url, "GET", "/sessions?limit=1000");
    if (!listed.json.sessions.includes(id)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`session ${id} did not expire within ${timeoutMs} ms`);
}

test("a session whose turn is still streaming is not expired under it", async () => {
  const streaming = (await server.createSession()).sessionId;
  let release!: () => void;
  hold = new Promise<void>((r) => (release = r));
  const atEngine = new Promise<void>((r) => (reached = r));
  const res = await fetch(`${server.url}/sessions/${streaming}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "Hello?" }] }),
  });
  assert.is(res.status, 200, "the stream has begun");
  try {
    await atEngine;
    // Touched after the stream began: once it expired, a sweep was past the streaming one's due time.
    const marker = (await server.createSession()).sessionId;
    await untilGone(marker);
    const listed = await call<{ sessions: string[] }>(server.url, "GET", "/sessions");
    assert.ok(listed.json.sessions.includes(streaming), "a session with a turn streaming is never idle");
  } finally {
    hold = undefined;
    release();
  }
  assert.ok((await res.text()).endsWith("data: [DONE]\n\n"));
  const got = await call<{ records: unknown[] }>(server.url, "GET", `/sessions/${streaming}`);
  assert.is(got.json.records.length, 1);
});

test.run();
