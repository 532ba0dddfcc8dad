// The qwennext family (Qwen3-Thinking-2507 / Qwen3-Next-Thinking) on the real Qwen3
// vocabulary with a stock-2507-style template: detection, settings, its fixed template
// against the stock layout, the generation prompt that opens `<think>\n` (the completion
// starts inside its reasoning), a worked example, the parser, and a TITO loop.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { jinjaRenderer, type ChatMessage } from "../../../sessions/chat-template.ts";
import { detectFamily, selectFamily, type AssistantTurn } from "../../../sessions/families/index.ts";
import { QWENNEXT_TEMPLATE } from "../../../sessions/families/qwen3-template.ts";
import { generationPromptInputs } from "../../../sessions/generation-prompt.ts";
import { planPrompt, promptContext } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { qwennextFolder } from "./chatml-folders.ts";
import { counter, driftTypes, playTurn } from "./glm-minimax-loop.ts";

const folder = qwennextFolder();
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const stock = jinjaRenderer(folder);
const IM_START = folder.tokenId("<|im_start|>")!;
const IM_END = folder.tokenId("<|im_end|>")!;
const NL = folder.encode("\n")[0]!;

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    },
  },
];
const mine = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs: Record<string, unknown> = ctx.kwargs) =>
  ctx.renderer.render(messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools });
const call = (city: string) => ({ type: "function" as const, function: { name: "get_weather", arguments: { city } } });
const history: ChatMessage[] = [
  { role: "system", content: "You are a weather bot." },
  { role: "user", content: "Weather in Paris and Rome?" },
];
const TWO_CALLS: AssistantTurn = {
  content: "Checking both.",
  reasoning_content: "Two cities.",
  tool_calls: [call("Paris"), call("Rome")],
};

test("settings: the Qwen3 vocabulary with a template that always opens <think> is qwennext", () => {
  assert.is(detectFamily(folder), "qwennext");
  assert.is(family.name, "qwennext");
  assert.is(family.maxTrimTokens, 0);
  assert.equal([...family.trailingTokenIds], [NL]);
  assert.equal(family.appendRoles, ["tool", "user", "system", "assistant"]);
  assert.equal(family.pinnedKwargs, { clear_thinking: false });
  assert.equal(family.sglangParsers, { reasoning: "qwen3", toolCall: "qwen25" });
  assert.equal(family.stopTokens, ["<|im_end|>"]);
  assert.is(family.template, QWENNEXT_TEMPLATE);
  assert.equal(family.boundaryIds([5, IM_END]), [NL]);
  assert.equal(family.boundaryIds([IM_END, 5]), []);
  assert.ok(family.isAssistantSegment(IM_START, "assistant\n<think>\n"));
  assert.not.ok(family.isAssistantSegment(IM_START, "system\n"));
  assert.equal(generationPromptInputs(ctx.renderer.template!), []);
  // The folder's own (stock) template must not be what detection keys on alone: our fixed one reads the same.
  assert.not.ok(QWENNEXT_TEMPLATE.includes("enable_thinking"));
});

test("fixed template = stock layout where that is append-only; the generation prompt always opens <think>", () => {
  const toolRun: ChatMessage[] = [
    ...history,
    { role: "assistant", ...TWO_CALLS },
    { role: "tool", tool_call_id: "a", content: "sunny" },
    { role: "tool", tool_call_id: "b", content: "rain" },
  ];
  for (const messages of [history, toolRun]) {
    const expected = stock.render(messages, { addGenerationPrompt: true, tools });
    assert.is(mine(messages, true), expected);
    assert.is(mine(messages, true, { enable_thinking: false }), expected, "no thinking switch");
  }
  assert.ok(
    mine(history, true).endsWith(
      "<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n<|im_start|>assistant\n<think>\n",
    ),
  );
  // The stock loop.last case rewrites a plain answer once something follows; the fixed one does not.
  const answered: ChatMessage[] = [...history, { role: "assistant", content: "Sunny." }];
  const next: ChatMessage[] = [...answered, { role: "user", content: "Tomorrow?" }];
  const stockRender = (m: ChatMessage[]) => stock.render(m, { addGenerationPrompt: false, tools });
  assert.not.ok(stockRender(next).startsWith(stockRender(answered)));
  assert.ok(mine(next, false).startsWith(mine(answered, false)));
});

test("worked example: the increment after a tool call ends in the opened think block", () => {
  const t = new Trajectory("next-example");
  const first = playTurn(
    ctx,
    t,
    history,
    { content: "", reasoning_content: "Look it up.", tool_calls: [call("Paris")] },
    "<|im_end|>",
    tools,
    counter(),
  );
  const id = (first.message.tool_calls as Array<{ id: string }>)[0]!.id;
  const request = [...history, first.message, { role: "tool", tool_call_id: id, content: "sunny" }];
  const plan = planPrompt(ctx, t, request, tools);
  const base = t.currentIds.length;
  assert.equal(plan.promptIds.slice(0, base), [...t.currentIds]);
  assert.is(plan.promptIds[base], NL);
  assert.is(
    folder.decode(plan.promptIds.slice(base + 1)),
    "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n",
  );
});

test("round trip: the completion starts inside the reasoning and renders back as written", () => {
  const prompt = mine(history, true);
  const full = mine([...history, { role: "assistant", ...TWO_CALLS }], false);
  const generated = full.slice(prompt.length, -"<|im_end|>\n".length);
  assert.ok(generated.startsWith("Two cities.\n</think>\n\nChecking both.\n<tool_call>\n"));
  assert.is(family.formatCompletion(TWO_CALLS, ctx.kwargs), generated);
  const { malformedToolCalls, ...message } = family.parseCompletion(generated + "<|im_end|>", {
    tools,
    newId: counter(),
  });
  assert.is(malformedToolCalls, 0);
  assert.is(message.reasoning_content, "Two cities.");
  assert.is(message.content, "Checking both.");
  assert.equal(
    message.tool_calls!.map((c) => JSON.parse(c.function.arguments)),
    [{ city: "Paris" }, { city: "Rome" }],
  );
  assert.is(mine([...history, { role: "assistant", ...message }], false), full);
  // An empty reasoning: the model closes the block at once; the template writes the same.
  assert.is(family.formatCompletion({ content: "Hi." }), "\n</think>\n\nHi.");
  assert.is(mine([...history, { role: "assistant", content: "Hi." }], false), prompt + "\n</think>\n\nHi.<|im_end|>\n");
});

test("parser: cut by the length limit inside the reasoning, it is all reasoning; a call ends unclosed reasoning", () => {
  assert.equal(family.parseCompletion("Still thinking about"), {
    content: "",
    reasoning_content: "Still thinking about",
    malformedToolCalls: 0,
  });
  const direct = family.parseCompletion(
    'Need it.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>',
    { newId: counter() },
  );
  assert.is(direct.reasoning_content, "Need it.");
  assert.is(direct.tool_calls![0]!.function.arguments, '{"city":"Oslo"}');
  const bad = family.parseCompletion('r\n</think>\n\n<tool_call>\n{"name": 1}\n</tool_call>');
  assert.equal([bad.content, bad.malformedToolCalls], ['<tool_call>\n{"name": 1}\n</tool_call>', 1]);
});

test("TITO loop: tool run, user append, system append; prompts equal a fresh render, no drift", () => {
  const t = new Trajectory("qwennext");
  const newId = counter();
  const first = playTurn(ctx, t, history, TWO_CALLS, "<|im_end|>", tools, newId);
  const [c1, c2] = first.message.tool_calls as Array<{ id: string }>;
  const r2: ChatMessage[] = [
    ...history,
    first.message,
    { role: "tool", tool_call_id: c1!.id, content: "sunny" },
    { role: "tool", tool_call_id: c2!.id, content: "rain" },
  ];
  const second = playTurn(
    ctx,
    t,
    r2,
    { content: "Sunny, rain.", reasoning_content: "Done." },
    "<|im_end|>",
    tools,
    newId,
  );
  const r3: ChatMessage[] = [
    ...r2,
    second.message,
    { role: "system", content: "Be brief." },
    { role: "user", content: "Oslo?" },
  ];
  const third = playTurn(
    ctx,
    t,
    r3,
    { content: "", reasoning_content: "Call.", tool_calls: [call("Oslo")] },
    "<|im_end|>",
    tools,
    newId,
  );
  for (const [played, request] of [
    [first, history],
    [second, r2],
    [third, r3],
  ] as const)
    assert.equal(played.promptIds, folder.encode(mine(request, true)));
  assert.equal(driftTypes(ctx, t), []);
});

test.run();
