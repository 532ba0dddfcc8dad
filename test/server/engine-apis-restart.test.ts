// A session on the vllm-completions API survives its worker's kill -9: the journal replays
// a token-level record (its request holds only ids) in the new worker process, and the
// next turn extends the replayed session. Real processes: the embedding API's tree.
import { test } from "uvu";
import * as assert from "uvu/assert";
import OpenAI from "openai";
import { startSessionServer, type SessionServer } from "../../index.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { call, newSession } from "../helpers/server.ts";
import { waitForEvent } from "../helpers/events.ts";
import type { RawRecord } from "../helpers/turn-records.ts";
import type { SupervisionEvent } from "../../actors/index.ts";

let engine: SimEngine;
let server: SessionServer | undefined;

test.before(async () => {
  engine = await startSimEngine({});
});
test.after(async () => {
  await server?.shutdown();
  await engine?.close();
});

async function serve(
  api: "vllm-completions",
  engineUrl: string,
  extra: Record<string, unknown>,
): Promise<SessionServer> {
  server = await startSessionServer({ engineUrl, engineApi: api, workers: 1, logLevel: "warn", ...extra });
  return server;
}

test("vllm-completions: a session survives its worker's restart (journal replay of an ids-only record)", async () => {
  const server = await serve("vllm-completions", engine.url, { allowedAppendRoles: ["tool", "user"] });
  const id = await newSession(server.url);
  const client = new OpenAI({ baseURL: `${server.url}/sessions/${id}/v1`, apiKey: "unused" });
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "Hello" }];
  const first = await client.chat.completions.create({ model: "m", messages });
  const before = await call<{ metadata: { accumulated_token_ids: number[] } }>(server.url, "GET", `/sessions/${id}`);
  const events: SupervisionEvent[] = [];
  server.on("event", (e) => events.push(e));
  process.kill(server.tree().shards[0]!.pid!, "SIGKILL");
  await waitForEvent(
    server,
    () => events,
    (e) => e.actor === "shard-0" && e.kind === "restarted",
  );
  const after = await call<{ metadata: { accumulated_token_ids: number[] } }>(server.url, "GET", `/sessions/${id}`);
  assert.is(after.status, 200, after.text);
  assert.equal(after.json.metadata.accumulated_token_ids, before.json.metadata.accumulated_token_ids);
  messages.push(first.choices[0]!.message, { role: "user", content: "And again?" });
  const next = await client.chat.completions.create({ model: "m", messages });
  assert.ok(next.choices[0]!.message.content);
  const records = await call<{ records: RawRecord[] }>(server.url, "GET", `/sessions/${id}`);
  assert.is(records.json.records.length, 2, "the turn after the restart extended the replayed session");
});

test.run();
