// Shared bits of the server integration tests: a gated simulated engine in the test
// process (the stand-in for the GPU engine), small HTTP helpers, and a Qwen tool.
import { startSimEngine, type SimEngine, type SimEngineOptions } from "../../server/sim-engine/sim-engine.ts";
import type { ChatCompletion, SessionCreatedBody, WireMessage } from "./bodies.ts";

export const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

/** An engine whose chat replies can be held at the engine until released. */
export interface GatedEngine extends SimEngine {
  /** The next chat requests wait at the engine until release(); resolves when one arrives. */
  hold(): { arrived: Promise<void>; release(): void };
}

/** `options`: the simulated engine's (a loaded tokenizer folder to share, say), but beforeReply. */
export async function startGatedEngine(options: Omit<SimEngineOptions, "beforeReply"> = {}): Promise<GatedEngine> {
  let gate: { arrived: () => void; released: Promise<void> } | undefined;
  const engine = await startSimEngine({
    ...options,
    beforeReply: async () => {
      if (!gate) return;
      gate.arrived();
      await gate.released;
    },
  });
  return Object.assign(engine, {
    hold() {
      let arrived!: () => void;
      let release!: () => void;
      const arrivedP = new Promise<void>((r) => (arrived = r));
      const released = new Promise<void>((r) => (release = r));
      gate = { arrived, released };
      return {
        arrived: arrivedP,
        release: () => {
          gate = undefined;
          release();
        },
      };
    },
  });
}

export interface JsonResponse<Body = unknown> {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body (undefined when empty or not JSON), typed as the caller expects it. */
  json: Body;
}

export async function call<Body = unknown>(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<JsonResponse<Body>> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" || body instanceof Uint8Array ? (body as string) : JSON.stringify(body);
    (init.headers as Record<string, string>)["content-type"] ??= "application/json";
  }
  const res = await fetch(base + path, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json: json as Body };
}

export async function newSession(base: string): Promise<string> {
  const res = await call<SessionCreatedBody>(base, "POST", "/sessions");
  if (res.status !== 200) throw new Error(`POST /sessions: ${res.status} ${res.text}`);
  return res.json.session_id;
}

/** Lists the sessions (which touches none of them) until `id` is gone (expired); a bounded loop. */
export async function untilSessionGone(base: string, id: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const listed = await call<{ sessions: string[] }>(base, "GET", "/sessions?limit=1000");
    if (!listed.json.sessions.includes(id)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`session ${id} did not expire within ${timeoutMs} ms`);
}

/**
 * One chat turn; returns the response (a ChatCompletion unless the caller expects an error
 * body) and the assistant message to append to the history (undefined when there is none).
 */
export async function chat<Body = ChatCompletion>(
  base: string,
  id: string,
  messages: unknown[],
  extra: Record<string, unknown> = {},
) {
  const res = await call<Body>(base, "POST", `/sessions/${id}/v1/chat/completions`, { model: "m", messages, ...extra });
  const reply = res.json as Partial<ChatCompletion> | undefined;
  return { res, message: reply?.choices?.[0]?.message };
}

/** A tool loop: user asks, the model calls the tool, the tool answers, the model replies. */
export async function toolLoop(base: string, id: string) {
  const messages: WireMessage[] = [
    { role: "system", content: "You are helpful." },
    { role: "user", content: "What is the weather in Paris?" },
  ];
  const first = await chat(base, id, messages, { tools: [WEATHER_TOOL] });
  messages.push(first.message!);
  const call0 = first.message?.tool_calls?.[0];
  messages.push({ role: "tool", tool_call_id: call0?.id, content: '{"temp_c": 21}' });
  const second = await chat(base, id, messages, { tools: [WEATHER_TOOL] });
  messages.push(second.message!);
  return { first, second, messages };
}
