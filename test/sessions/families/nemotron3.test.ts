// The nemotron3 family (NVIDIA Nemotron 3, HF native template) on a synthetic folder whose
// template is written in Nemotron's format (docs/models.md) with truncate_history_thinking:
// detection and settings, the assistant start with its newline, the pinned kwarg, the
// worked example, the nemotron_3 / qwen3_coder parser (the reasoning keeps its trailing
// newline) against the template, drift classes, and a TITO loop with a system append.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { selectFamily } from "../../../sessions/families/index.ts";
import { promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { nemotron3Folder } from "./chatml-folders.ts";
import { counter } from "./tito-loop.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.nemotron3;

const folder = nemotron3Folder();
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const render = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs = ctx.kwargs) =>
  renderOrThrow(ctx.renderer, messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools });

test("truncate_history_thinking must be pinned false: by default earlier think blocks are emptied", () => {
  const before: ChatMessage[] = [...history, { role: "assistant", content: "Sunny.", reasoning_content: "easy\n" }];
  const after: ChatMessage[] = [...before, { role: "user", content: "Thanks." }];
  assert.not.ok(render(after, false, {}).startsWith(render(before, false, {})), "default: not append-only");
  assert.ok(render(after, false, {}).includes("<|im_start|>assistant\n<think></think>Sunny.<|im_end|>\n"));
  assert.ok(render(after, false).startsWith(render(before, false)), "pinned: append-only");
  assert.ok(render(after, false).includes("<|im_start|>assistant\n<think>\neasy\n</think>Sunny.<|im_end|>\n"));
});

test("round trip: the reasoning keeps its trailing newline (nemotron_3), which renders the model's text back", () => {
  const prompt = render(history, true);
  assert.ok(prompt.endsWith("<|im_start|>assistant\n<think>\n"));
  const full = render([...history, { role: "assistant", ...TWO_CALLS }], false);
  const generated = full.slice(prompt.length, -"<|im_end|>\n".length);
  assert.is(
    generated,
    "Two lookups.\n</think>Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n" +
      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n" +
      "<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>\n",
  );
  assert.is(family.formatCompletion(TWO_CALLS, ctx.kwargs), generated);
  const { malformedToolCalls, ...message } = family.parseCompletion(generated + "<|im_end|>", {
    tools,
    kwargs: ctx.kwargs,
    newId: counter(),
  });
  assert.equal(message, {
    content: "Let me check.\n",
    reasoning_content: "Two lookups.\n",
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris","days":2}' } },
      { id: "call_2", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome"}' } },
    ],
  });
  assert.is(malformedToolCalls, 0);
  assert.is(render([...history, { role: "assistant", ...message }], false), full);
  // A plain answer round-trips too; thinking off, the prompt closed the block.
  const plain = family.parseCompletion("\nIt is sunny.\n</think>Sunny.", { kwargs: ctx.kwargs });
  assert.equal(plain, { content: "Sunny.", reasoning_content: "It is sunny.\n", malformedToolCalls: 0 });
  assert.is(
    render([...history, { role: "assistant", ...plain }], false),
    prompt + "It is sunny.\n</think>Sunny.<|im_end|>\n",
  );
  const off = { ...ctx.kwargs, enable_thinking: false };
  assert.ok(render(history, true, off).endsWith("<|im_start|>assistant\n<think></think>"));
  assert.equal(family.parseCompletion("Sunny.<|im_end|>", { kwargs: off }), {
    content: "Sunny.",
    malformedToolCalls: 0,
  });
  assert.is(family.formatCompletion({ content: "Sunny." }, off), "Sunny.");
});

test("parser: a call ends unclosed reasoning; a length cut is all reasoning; a malformed block counts", () => {
  const parse = (text: string) => family.parseCompletion(text, { tools, kwargs: ctx.kwargs, newId: counter() });
  const direct = parse(
    "Need it.\n<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n",
  );
  assert.equal([direct.reasoning_content, direct.content], ["Need it.\n", ""]);
  assert.is(direct.tool_calls![0]!.function.arguments, '{"days":3}');
  assert.equal(parse("Still going"), { content: "", reasoning_content: "Still going", malformedToolCalls: 0 });
  const bad = parse("r\n</think><tool_call>\n<function=>\n</function>\n</tool_call>\n");
  assert.equal([bad.content, bad.malformedToolCalls], ["<tool_call>\n<function=>\n</function>\n</tool_call>", 1]);
});

test("drift classes: assistant text (after `assistant\\n`) is soft; system and user text are hard", () => {
  const messages: ChatMessage[] = [...history, { role: "assistant", content: "Sunny.", reasoning_content: "r\n" }];
  const ids = (m: ChatMessage[]) => folder.encode(render(m, false));
  const expected = ids(messages);
  const types = (m: ChatMessage[]) => compareTrajectories(folder, family, expected, ids(m)).map((x) => x.type);
  assert.equal(types(messages), []);
  assert.equal(types([...history, { role: "assistant", content: "Sunny!", reasoning_content: "r\n" }]), [
    "assistant_text",
  ]);
  assert.equal(types([{ role: "system", content: "Other." }, ...messages.slice(1)]), ["non_assistant_text"]);
  assert.equal(types([history[0]!, { role: "user", content: "Other?" }, messages[2]!]), ["non_assistant_text"]);
});

test.run();
