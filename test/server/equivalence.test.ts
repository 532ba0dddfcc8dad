// Observational equivalence: with N workers the server is
// indistinguishable from N=1 — same statuses, same bodies, ids and timestamps aside.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { ChatCompletion, SessionCreatedBody, WireMessage } from "../helpers/bodies.ts";
import { call, WEATHER_TOOL } from "../helpers/server.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

let engine: SimEngine;
const servers: InProcessTree[] = [];

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: sharedFolder() });
});
test.after(async () => {
  await Promise.all(servers.map((s) => s.shutdown()));
  await engine?.close();
});

/** Replace what legitimately differs between runs: ids, timestamps, the engine's reply id/created. */
function mask(value: unknown, ids: string[]): unknown {
  if (typeof value === "string") return ids.reduce((s, id, i) => s.split(id).join(`<session ${i}>`), value);
  if (Array.isArray(value)) return value.map((v) => mask(v, ids));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = ["timestamp", "created", "id"].includes(k) && typeof v !== "object" ? "<masked>" : mask(v, ids);
    }
    return out;
  }
  return value;
}

interface Step {
  step: string;
  status: number;
  body: unknown;
}

/** A scripted client: sessions, tool loops, a rollback, errors, records, deletes. */
async function script(base: string): Promise<Step[]> {
  const seen: Step[] = [];
  const ids: string[] = [];
  const step = async <Body = unknown>(name: string, method: string, path: string, body?: unknown) => {
    const res = await call<Body>(base, method, path, body);
    seen.push({ step: name, status: res.status, body: res.json ?? res.text });
    return res;
  };
  for (let s = 0; s < 6; s++)
    ids.push((await step<SessionCreatedBody>(`create ${s}`, "POST", "/sessions")).json.session_id);
  for (const [s, id] of ids.entries()) {
    const messages: WireMessage[] = [{ role: "user", content: `Weather for city number ${s}?` }];
    for (let turn = 0; turn < 3; turn++) {
      const res = await step<ChatCompletion>(`chat ${s}.${turn}`, "POST", `/sessions/${id}/v1/chat/completions`, {
        model: "m",
        messages,
        tools: [WEATHER_TOOL],
      });
      const reply = res.json.choices[0].message;
      messages.push(reply, {
        role: "tool",
        tool_call_id: reply.tool_calls?.[0]?.id ?? "none",
        content: `sunny ${turn}`,
      });
    }
    // Roll back one turn: resend the history without the last assistant turn's tail.
    await step(`rollback ${s}`, "POST", `/sessions/${id}/v1/chat/completions`, {
      model: "m",
      messages: messages.slice(0, 4),
      tools: [WEATHER_TOOL],
    });
    await step(`two-step rollback ${s}`, "POST", `/sessions/${id}/v1/chat/completions`, {
      model: "m",
      messages: messages.slice(0, 1),
    });
    await step(`bad json ${s}`, "POST", `/sessions/${id}/v1/chat/completions`, "{oops");
    await step(`get ${s}`, "GET", `/sessions/${id}`);
  }
  await step("proxy", "GET", `/sessions/${ids[0]}/v1/models`);
  for (const [s, id] of ids.entries()) {
    if (s % 2 === 0) await step(`delete ${s}`, "DELETE", `/sessions/${id}`);
    await step(`get after delete ${s}`, "GET", `/sessions/${id}`);
  }
  return mask(seen, ids) as Step[];
}

test("N=1 and N=4 give the same statuses and bodies", async () => {
  const one = await startTree({ engineUrl: engine.url, workers: 1, logLevel: "warn" });
  servers.push(one);
  const a = await script(one.url);
  await one.shutdown();
  const four = await startTree({ engineUrl: engine.url, workers: 4, logLevel: "warn" });
  servers.push(four);
  const b = await script(four.url);
  assert.is(a.length, b.length);
  for (let i = 0; i < a.length; i++) assert.equal(b[i], a[i], `step ${a[i].step}`);
  const statuses = new Set(a.map((s) => s.status));
  for (const status of [200, 204, 400, 404]) assert.ok(statuses.has(status), `the script exercises ${status}`);
});

test.run();
