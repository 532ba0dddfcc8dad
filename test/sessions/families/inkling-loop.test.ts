// TITO loops of the inkling family without HTTP: on the synthetic Inkling folder, and on the
// real gpt-oss BPE with Inkling's control tokens laid over ids 200000+ (docs/models.md).
// Parallel calls, a tool run, user, system and injected-assistant appends: every prompt
// extends the last checkpoint and equals a fresh render, and nothing drifts.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { detectFamily, selectFamily, type AssistantTurn } from "../../../sessions/families/index.ts";
import { promptContext, renderOrThrow, type PromptContext } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import type { TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { counter, driftTypes, playTurn } from "./glm-minimax-loop.ts";
import { gptossInklingFolder, inklingFolder } from "./kimi-inkling-folders.ts";

const STOP = "<|content_model_end_sampling|>";
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { days: { type: "integer" }, City: { type: "string" } } },
    },
  },
  { type: "function", function: { name: "search", parameters: { type: "object" } } },
];
const call = (name: string, args: Record<string, unknown>) => ({
  type: "function" as const,
  function: { name, arguments: args },
});
const TWO_CALLS: AssistantTurn = {
  content: "Let me check both.",
  reasoning_content: "Two lookups needed.",
  tool_calls: [
    call("get_weather", { days: 2, City: "Paris" }),
    call("search", { query: "Rome ☀", filters: { z: [1, { b: 2, a: null }], _: true } }),
  ],
};
const history: ChatMessage[] = [
  { role: "system", content: "You are a weather bot." },
  { role: "user", content: "Weather in Paris, and search Rome?" },
];

function loop(name: string, f: TokenizerFolder, c: PromptContext) {
  const t = new Trajectory(name);
  const newId = counter();
  const r1 = history;
  const first = playTurn(c, t, r1, TWO_CALLS, STOP, tools, newId);
  const [c1, c2] = first.message.tool_calls as Array<{ id: string }>;
  const r2: ChatMessage[] = [
    ...r1,
    first.message,
    { role: "tool", tool_call_id: c1!.id, content: "sunny" },
    { role: "tool", tool_call_id: c2!.id, content: "3 results" },
  ];
  const second = playTurn(
    c,
    t,
    r2,
    { content: "Paris is sunny.", reasoning_content: "Summarize." },
    STOP,
    tools,
    newId,
  );
  const r3: ChatMessage[] = [...r2, second.message, { role: "user", content: "And Rome tomorrow?" }];
  const third = playTurn(
    c,
    t,
    r3,
    { content: "", reasoning_content: "One call.", tool_calls: [call("get_weather", { City: "Rome", days: 1 })] },
    STOP,
    tools,
    newId,
  );
  const r4: ChatMessage[] = [
    ...r3,
    third.message,
    { role: "tool", tool_call_id: (third.message.tool_calls as Array<{ id: string }>)[0]!.id, content: "rain" },
    { role: "system", content: "Answer in one line." },
    { role: "assistant", content: "(injected note)" },
    { role: "user", content: "Summary?" },
  ];
  const fourth = playTurn(c, t, r4, { content: "Rain in Rome.", reasoning_content: "Wrap up." }, STOP, tools, newId);
  for (const [played, request] of [
    [first, r1],
    [second, r2],
    [third, r3],
    [fourth, r4],
  ] as const)
    assert.equal(
      played.promptIds,
      f.encode(renderOrThrow(c.renderer, request, { addGenerationPrompt: true, kwargs: { ...c.kwargs }, tools })),
    );
  assert.equal(driftTypes(c, t), []);
  return t;
}

test("synthetic folder: parallel calls, tool run, user, system and assistant appends; fresh renders, no drift", () => {
  const folder = inklingFolder();
  const family = selectFamily(folder);
  loop("inkling", folder, promptContext(folder, family, { ...serverKwargs(family) }));
});

test("the gpt-oss BPE with Inkling's control tokens laid over it", () => {
  const real = gptossInklingFolder();
  assert.is(detectFamily(real), "inkling");
  const fam = selectFamily(real);
  assert.equal(fam.driftSpecialIds, new Set([200000, 200001, 200002, 200003]));
  assert.equal(real.encode("<|message_model|>"), [200001]);
  assert.ok(real.encode("Weather in Paris").length < "Weather in Paris".length, "real BPE merges");
  const c = promptContext(real, fam, { ...serverKwargs(fam) });
  const t = loop("inkling-gptoss", real, c);
  const canonical = renderOrThrow(c.renderer, t.messages, {
    addGenerationPrompt: false,
    kwargs: { ...c.kwargs },
    tools,
  });
  assert.is(real.decode([...t.currentIds]), canonical, "the trajectory decodes to the canonical render");
});

test.run();
