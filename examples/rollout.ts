// An example rollout program: how to embed tito-server. It starts the session server
// in this process (simulated engine), runs K tool-using agents concurrently with the
// official `openai` client against each session's OpenAI-compatible base URL, calls
// server.check() before every generation step, collects each session's training sample
// as one JSONL line, prints a summary and shuts down. With --kill-worker-after N it
// SIGKILLs a busy worker after N generation steps: the supervisor restarts it, and the
// episodes that did not make it are reported by session and shard, never dropped quietly.
//
//   npm run example:rollout -- --agents 8 --workers 2 --kill-worker-after 6
import { randomBytes } from "node:crypto";
import { appendFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import OpenAI from "openai";
import {
  startSessionServer,
  SessionServerFailedError,
  type SessionServer,
  type SupervisionEvent,
  type TrainingSample,
} from "../index.ts";

const { values: flags } = parseArgs({
  options: {
    agents: { type: "string", default: "8" },
    workers: { type: "string", default: "2" },
    cities: { type: "string", default: "2" },
    "latency-ms": { type: "string", default: "20" },
    "max-seq-len": { type: "string" },
    "kill-worker-after": { type: "string" },
    durability: { type: "string", default: "journal" },
    out: { type: "string", default: join(tmpdir(), `tito-rollout-${process.pid}.jsonl`) },
  },
});
const K = Number(flags.agents);
// The admin token stays in this process: agents only ever see their own session token.
const ADMIN_TOKEN = process.env.TITO_AUTH_TOKEN || randomBytes(24).toString("base64url");
const ADMIN = `Bearer ${ADMIN_TOKEN}`;
const CITIES = ["Paris", "Oslo", "Lima", "Quito", "Rome", "Nairobi", "Hanoi", "Perth"].slice(0, Number(flags.cities));
const maxSeqLen = flags["max-seq-len"] === undefined ? undefined : Number(flags["max-seq-len"]);
const killAfter = flags["kill-worker-after"] === undefined ? undefined : Number(flags["kill-worker-after"]);

const WEATHER_TOOL: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

/** The "environment": a deterministic tool. */
function runTool(name: string, args: string): string {
  const city = String((JSON.parse(args || "{}") as { city?: unknown }).city ?? "?");
  return JSON.stringify({ tool: name, city, temp_c: 10 + ((city.length * 7) % 20) });
}

interface Episode {
  agent: number;
  sessionId?: string;
  shard?: number;
  sample?: TrainingSample;
  error?: string;
  /** Its shard restarted while the episode was live. */
  onRestartedShard?: boolean;
}

let steps = 0;
let retried = 0;
let killed: { shard: number; pid: number } | undefined;
const live = new Set<Episode>();

/** Kills the worker that owns the most live episodes (the demonstration of --kill-worker-after). */
function maybeKillWorker(server: SessionServer): void {
  if (killAfter === undefined || killed || steps < killAfter) return;
  const counts = new Map<number, number>();
  for (const ep of live) if (ep.shard !== undefined) counts.set(ep.shard, (counts.get(ep.shard) ?? 0) + 1);
  const shard = [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 0;
  const pid = server.tree().shards[shard]!.pid!;
  killed = { shard, pid };
  for (const ep of live) if (ep.shard === shard) ep.onRestartedShard = true;
  console.log(`killing worker of shard ${shard} (pid ${pid}) after ${steps} generation steps`);
  process.kill(pid, "SIGKILL");
}

/**
 * One generation step. A 503 means the worker died with this turn in flight; the turn was
 * not acknowledged, so it is sent again once: the router holds it until the restarted
 * worker is up, and with the journal the session is there again (with durability
 * "memory" it is gone, and the retry's 404 says so).
 */
async function generate(client: OpenAI, messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[], ep: Episode) {
  const request = () => client.chat.completions.create({ model: "policy", messages, tools: [WEATHER_TOOL] });
  try {
    return await request();
  } catch (err) {
    if (!(err instanceof OpenAI.APIError) || err.status !== 503) throw err;
    retried++;
    console.log(`retrying a turn of agent ${ep.agent} (session ${ep.sessionId}, shard ${ep.shard}): ${err.message}`);
    return await request();
  }
}

async function runEpisode(server: SessionServer, ep: Episode): Promise<void> {
  live.add(ep);
  try {
    // The rollout program holds the admin token; the agent gets only its session's token,
    // which may chat on this one session and nothing else (docs/security.md).
    const created = await server.createSession();
    ep.shard = created.shard;
    ep.sessionId = created.sessionId;
    // maxRetries 0: a lost session must surface as an error here, not be retried blindly.
    const client = new OpenAI({
      baseURL: `${server.url}/sessions/${ep.sessionId}/v1`,
      apiKey: created.sessionToken ?? "unused",
      maxRetries: 0,
    });
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are a weather assistant. Use the tool." },
    ];
    for (const city of CITIES) {
      messages.push({ role: "user", content: `Agent ${ep.agent}: what is the weather in ${city}?` });
      for (let step = 0; step < 4; step++) {
        server.check(); // a failed tree stops the rollout here, loudly
        const res = await generate(client, messages, ep);
        steps++;
        maybeKillWorker(server);
        const msg = res.choices[0]!.message;
        messages.push(msg);
        if (!msg.tool_calls?.length) break;
        for (const call of msg.tool_calls) {
          if (call.type !== "function") continue;
          messages.push({
            role: "tool",
            tool_call_id: call.id,
            content: runTool(call.function.name, call.function.arguments),
          });
        }
      }
    }
    ep.sample = await server.samples(ep.sessionId, { maxSeqLen });
    await fetch(`${server.url}/sessions/${ep.sessionId}`, { method: "DELETE", headers: { authorization: ADMIN } });
  } catch (err) {
    if (err instanceof SessionServerFailedError) throw err;
    ep.error = err instanceof Error ? err.message : String(err);
  } finally {
    live.delete(ep);
  }
}

async function main(): Promise<number> {
  const server = await startSessionServer({
    workers: Number(flags.workers),
    authToken: ADMIN_TOKEN,
    allowedAppendRoles: ["tool", "user"], // each new city is a new user turn
    durability: flags.durability as "journal" | "memory",
    simLatencyMs: Number(flags["latency-ms"]),
    logLevel: "warn",
  });
  const onEvent = (e: SupervisionEvent) => {
    if (e.kind === "restarting" || e.kind === "escalated")
      console.log(`[tito] ${e.actor} ${e.kind} ${JSON.stringify(e.detail)}`);
    if (e.kind !== "exited" || !e.actor.startsWith("shard-")) return;
    const shard = Number(e.actor.slice("shard-".length));
    for (const ep of live) if (ep.shard === shard) ep.onRestartedShard = true;
  };
  server.on("event", onEvent);
  try {
    const episodes: Episode[] = Array.from({ length: K }, (_, agent) => ({ agent }));
    await Promise.all(episodes.map((ep) => runEpisode(server, ep)));
    server.check(); // errors above may be the tree going down: say so instead of reporting nothing

    writeFileSync(flags.out!, "");
    for (const ep of episodes) if (ep.sample) appendFileSync(flags.out!, `${JSON.stringify(ep.sample)}\n`);
    const done = episodes.filter((ep) => ep.sample);
    const sum = (f: (s: TrainingSample) => number) => done.reduce((n, ep) => n + f(ep.sample!), 0);
    const turns = sum((s) => s.turns.length);
    const tokens = sum((s) => s.tokens.length);
    const generated = sum((s) => s.loss_mask.reduce((a, b) => a + b, 0));
    const truncated = done.filter((ep) => ep.sample!.status === "truncated").length;
    console.log(
      `sessions ${K}, samples ${done.length} (truncated ${truncated}), lost ${K - done.length}, retried ${retried}, turns ${turns}, tokens ${tokens}, generated tokens ${generated}`,
    );
    console.log(`samples written to ${flags.out}`);
    for (const ep of episodes) {
      if (ep.error)
        console.log(
          `lost: agent ${ep.agent} session ${ep.sessionId ?? "-"} shard ${ep.shard ?? "-"}${ep.onRestartedShard ? " (its worker restarted)" : ""}: ${ep.error}`,
        );
      else if (ep.onRestartedShard)
        console.log(`survived: agent ${ep.agent} session ${ep.sessionId} shard ${ep.shard} (its worker restarted)`);
    }
    return 0;
  } catch (err) {
    if (!(err instanceof SessionServerFailedError)) throw err;
    console.error(`session server failed: ${err.message}`, JSON.stringify(server.tree()));
    return 1;
  } finally {
    server.off("event", onEvent);
    await server.shutdown();
  }
}

process.exitCode = await main();
