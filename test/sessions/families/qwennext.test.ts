// The qwennext family (Qwen3-Thinking-2507 / Qwen3-Next-Thinking) on the real Qwen3
// vocabulary with a stock-2507-style template: detection, settings, its fixed template
// against the stock layout, the generation prompt that opens `<think>\n` (the completion
// starts inside its reasoning), a worked example, the parser, and a TITO loop.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { jinjaRenderer, type ChatMessage } from "../../../sessions/chat-template.ts";
import { selectFamily } from "../../../sessions/families/index.ts";
import { QWENNEXT_TEMPLATE } from "../../../sessions/families/qwen3-template.ts";
import { generationPromptInputs } from "../../../sessions/generation-prompt.ts";
import { promptContext } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { qwennextFolder } from "./chatml-folders.ts";
import { counter } from "./tito-loop.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.qwennext;

const folder = qwennextFolder();
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const stock = jinjaRenderer(folder);

const mine = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs: Record<string, unknown> = ctx.kwargs) =>
  ctx.renderer.render(messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools });

test("settings the table does not hold: a fixed template with no thinking switch", () => {
  assert.is(family.template, QWENNEXT_TEMPLATE);
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

test.run();
