// The `openai` client replaying history the way agent harnesses do, under each
// --message-matcher, through the in-process tree against a thinking simulated engine: two turns
// (a tool call, then an answer), then a third whose history is the client's rewritten
// copy. With a tool call's `index` (what streaming clients keep) or re-serialized
// arguments, every matcher extends the trajectory exactly; tool calls re-id'd pass loose
// and role-content; history without reasoning passes role-content only. Where a matcher
// refuses, it is the rollback error, and the session is left as it was.
import { test } from "uvu";
import * as assert from "uvu/assert";
import OpenAI from "openai";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import { newSession, WEATHER_TOOL } from "../helpers/server.ts";
import { exactTrajectory } from "../helpers/turn-records.ts";
import { sharedFolder, startTree, type InProcessTree } from "../helpers/tree.ts";

type Matcher = "strict" | "loose" | "role-content";
type Message = OpenAI.Chat.ChatCompletionMessageParam;
type Assistant = OpenAI.Chat.ChatCompletionAssistantMessageParam & { reasoning_content?: string };
type ToolCall = OpenAI.Chat.ChatCompletionMessageFunctionToolCall;

let engine: SimEngine;
const servers = new Map<Matcher, InProcessTree>();

test.before(async () => {
  engine = await startSimEngine({ tokenizerFolder: sharedFolder(), reasoning: true });
  for (const messageMatcher of ["strict", "loose", "role-content"] as const)
    servers.set(
      messageMatcher,
      await startTree({
        engineUrl: engine.url,
        engineApi: "sglang-generate",
        workers: 1,
        messageMatcher,
        logLevel: "warn",
      }),
    );
});
test.after(async () => {
  for (const server of servers.values()) await server.shutdown();
  await engine?.close();
});

const tools = [WEATHER_TOOL] as OpenAI.Chat.ChatCompletionTool[];

/** Two committed turns on a new session: the history as the server answered it. */
async function twoTurns(url: string) {
  const id = await newSession(url);
  const client = new OpenAI({ baseURL: `${url}/sessions/${id}/v1`, apiKey: "unused", maxRetries: 0 });
  const history: Message[] = [
    { role: "system", content: "You are helpful." },
    { role: "user", content: "What is the weather in Paris?" },
  ];
  const first = (await client.chat.completions.create({ model: "m", messages: history, tools })).choices[0]!;
  assert.is(first.finish_reason, "tool_calls");
  const asked = first.message as Assistant;
  assert.ok(asked.reasoning_content, "the engine reasons");
  const call = first.message.tool_calls![0] as ToolCall;
  history.push(asked, { role: "tool", tool_call_id: call.id, content: '{"temp_c": 21}' });
  const second = (await client.chat.completions.create({ model: "m", messages: history, tools })).choices[0]!;
  history.push(second.message as Assistant);
  return { id, client, history };
}

/** What harnesses do to a history they replay. */
const REWRITES: Record<string, (history: Message[]) => Message[]> = {
  "a tool call's index": (history) =>
    history.map((m) =>
      m.role === "assistant" && m.tool_calls
        ? { ...m, tool_calls: m.tool_calls.map((c, index) => ({ ...c, index })) }
        : m,
    ),
  "re-serialized arguments": (history) =>
    history.map((m) =>
      m.role === "assistant" && m.tool_calls
        ? {
            ...m,
            tool_calls: (m.tool_calls as ToolCall[]).map((c) => {
              const args = JSON.parse(c.function.arguments) as Record<string, unknown>;
              const reordered = Object.fromEntries(Object.entries(args).reverse());
              return { ...c, function: { ...c.function, arguments: JSON.stringify(reordered, null, 2) } };
            }),
          }
        : m,
    ),
  "re-id'd tool calls": (history) => {
    const ids = new Map<string, string>();
    return history.map((m) => {
      if (m.role === "assistant" && m.tool_calls)
        return {
          ...m,
          tool_calls: m.tool_calls.map((c) => {
            ids.set(c.id, `toolu_${ids.size}`);
            return { ...c, id: ids.get(c.id)! };
          }),
        };
      if (m.role === "tool") return { ...m, tool_call_id: ids.get(m.tool_call_id) ?? m.tool_call_id };
      return m;
    });
  },
  "no reasoning": (history) =>
    history.map((m) => {
      if (m.role !== "assistant") return m;
      const { reasoning_content: _dropped, ...rest } = m as Assistant;
      return rest;
    }),
};

/** Which matchers take each rewrite as the same history. */
const ACCEPTS: Record<string, Matcher[]> = {
  "a tool call's index": ["strict", "loose", "role-content"],
  "re-serialized arguments": ["strict", "loose", "role-content"],
  "re-id'd tool calls": ["loose", "role-content"],
  "no reasoning": ["role-content"],
};

for (const matcher of ["strict", "loose", "role-content"] as const)
  for (const [what, rewrite] of Object.entries(REWRITES)) {
    const accepted = ACCEPTS[what]!.includes(matcher);
    test(`${matcher}: history with ${what} ${accepted ? "extends the trajectory exactly" : "is refused"}`, async () => {
      const url = servers.get(matcher)!.url;
      const { id, client, history } = await twoTurns(url);
      const replay = [...rewrite(history), { role: "user", content: "And tomorrow?" } as Message];
      if (accepted) {
        const third = await client.chat.completions.create({ model: "m", messages: replay, tools });
        assert.is(third.choices[0]!.finish_reason === null, false);
        await exactTrajectory(url, id, 3);
        return;
      }
      try {
        await client.chat.completions.create({ model: "m", messages: replay, tools });
        assert.unreachable(`${matcher} takes history with ${what}`);
      } catch (err) {
        assert.instance(err, OpenAI.BadRequestError);
        assert.match(
          (err as Error).message,
          /rollback failed: the request diverges from the session at message index 2/,
        );
      }
      await exactTrajectory(url, id, 2);
      // The history as it was sent back then still goes on.
      await client.chat.completions.create({ model: "m", messages: [...history, replay.at(-1)!], tools });
      await exactTrajectory(url, id, 3);
    });
  }

test.run();
