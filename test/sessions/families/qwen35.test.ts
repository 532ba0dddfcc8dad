// The qwen35 family (Qwen3.5) on a synthetic folder with Qwen3.5's ChatML ids: detection and
// settings (docs/models.md), its fixed template's layout (tools block, trimmed contents,
// Qwen3-Coder XML calls, no mid-session system), the pinned clear_thinking, the parser
// against the template, drift classes, and a TITO loop whose prompts equal a fresh render.
import { test } from "uvu";
import * as assert from "uvu/assert";
import type { ChatMessage } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { AppendRoleError, TemplateRenderError } from "../../../sessions/errors.ts";
import { selectFamily, type AssistantTurn } from "../../../sessions/families/index.ts";
import { generationPromptInputs } from "../../../sessions/generation-prompt.ts";
import { planPrompt, promptContext, renderOrThrow } from "../../../sessions/prompt-builder.ts";
import { serverKwargs } from "../../../sessions/template-kwargs.ts";
import { Trajectory } from "../../../sessions/trajectory.ts";
import { qwen35Folder } from "./chatml-folders.ts";
import { counter, playTurn } from "./tito-loop.ts";
import { call } from "./family-fixtures.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.qwen35;

const folder = qwen35Folder();
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const IM_START = folder.tokenId("<|im_start|>")!;
const IM_END = folder.tokenId("<|im_end|>")!;
const render = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs = ctx.kwargs, withTools = tools) =>
  renderOrThrow(ctx.renderer, messages, { addGenerationPrompt, kwargs: { ...kwargs }, tools: withTools });

test("settings the table does not hold: Qwen3.5's <|im_start|> id, a generation prompt reading one kwarg", () => {
  assert.is(IM_START, 248045);
  assert.equal(generationPromptInputs(ctx.renderer.template!), ["enable_thinking"]);
});

test("template layout: tools then the user's system text, trimmed contents, XML calls, one header per tool run", () => {
  const messages: ChatMessage[] = [
    ...history,
    {
      role: "assistant",
      content: " Let me check. ",
      reasoning_content: "\nneed tool\n",
      tool_calls: [call("get_weather", { city: "Paris" }), call("search", { query: "x", filters: { a: null } })],
    },
    { role: "tool", tool_call_id: "a", content: " sunny " },
    { role: "tool", tool_call_id: "b", content: "2 results" },
  ];
  const text = render(messages, true, ctx.kwargs, [tools[0]]);
  assert.is(
    text,
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n" +
      '{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": ' +
      '{"city": {"type": "string"}, "days": {"type": "integer"}, "hourly": {"type": "boolean"}}}}}\n</tools>' +
      "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n" +
      "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n" +
      "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n" +
      "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n" +
      "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested " +
      "within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n" +
      "- You may provide optional reasoning for your function call in natural language BEFORE the function call, " +
      "but NOT after\n- If there is no function call available, answer the question like normal with your current " +
      "knowledge and do not tell the user about function calls\n</IMPORTANT>\n\nYou are a weather bot.<|im_end|>\n" +
      "<|im_start|>user\nWeather in Paris, and search Rome?<|im_end|>\n" +
      // Qwen3.5's rendered history (docs/models.md), then a second call after one newline.
      "<|im_start|>assistant\n<think>\nneed tool\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n" +
      "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=search>\n" +
      '<parameter=query>\nx\n</parameter>\n<parameter=filters>\n{"a": null}\n</parameter>\n</function>\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n2 results\n</tool_response><|im_end|>\n" +
      "<|im_start|>assistant\n<think>\n",
  );
  assert.is(
    render(history, true, { ...ctx.kwargs, enable_thinking: false }, []),
    "<|im_start|>system\nYou are a weather bot.<|im_end|>\n<|im_start|>user\nWeather in Paris, and search Rome?<|im_end|>\n" +
      "<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
  const parts: ChatMessage[] = [{ role: "user", content: [{ type: "image" }, { type: "text", text: "What is it?" }] }];
  assert.is(
    render(parts, false, ctx.kwargs, []),
    "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is it?<|im_end|>\n",
  );
});

test("a system message after the first raises, so a system append is refused before rendering", () => {
  assert.throws(
    () => render([...history, { role: "system", content: "late" }], true),
    (e: unknown) => e instanceof TemplateRenderError && /System message must be at the beginning/.test(String(e)),
  );
  const t = new Trajectory("sys");
  playTurn(ctx, t, history, { content: "Hi.", reasoning_content: "r" }, "<|im_end|>", tools, counter());
  assert.throws(
    () => planPrompt(ctx, t, [...t.messages, { role: "system", content: "late" }], tools),
    (e: unknown) => e instanceof AppendRoleError,
  );
});

test("clear_thinking must be pinned false: by default a new user query drops earlier reasoning", () => {
  const before: ChatMessage[] = [...history, { role: "assistant", content: "Sunny.", reasoning_content: "easy" }];
  const after: ChatMessage[] = [...before, { role: "user", content: "Thanks." }];
  assert.not.ok(render(after, false, {}).startsWith(render(before, false, {})), "default: not append-only");
  assert.ok(render(after, false).startsWith(render(before, false)), "pinned: append-only");
  assert.ok(render(after, false).includes("<|im_start|>assistant\n<think>\neasy\n</think>\n\nSunny.<|im_end|>\n"));
});

test("round trip: formatCompletion is the template's text after the prompt and parses back (thinking on and off)", () => {
  for (const kwargs of [ctx.kwargs, { ...ctx.kwargs, enable_thinking: false }]) {
    const turn: AssistantTurn =
      kwargs.enable_thinking === false ? { ...TWO_CALLS, reasoning_content: undefined } : TWO_CALLS;
    const prompt = render(history, true, kwargs);
    const full = render([...history, { role: "assistant", ...turn }], false, kwargs);
    assert.ok(full.startsWith(prompt) && full.endsWith("<|im_end|>\n"));
    const generated = full.slice(prompt.length, -"<|im_end|>\n".length);
    assert.is(family.formatCompletion(turn, kwargs), generated);
    const { malformedToolCalls, ...message } = family.parseCompletion(generated + "<|im_end|>", {
      tools,
      kwargs,
      newId: counter(),
    });
    assert.is(malformedToolCalls, 0);
    assert.is(message.content, "Let me check.\n\n", "the text before the first call, not trimmed");
    assert.is(message.reasoning_content, turn.reasoning_content);
    assert.equal(
      message.tool_calls!.map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments)]),
      turn.tool_calls!.map((c, i) => [`call_${i + 1}`, c.function.name, c.function.arguments]),
    );
    assert.is(render([...history, { role: "assistant", ...message }], false, kwargs), full);
    assert.is(family.formatCompletion(message, kwargs), generated);
  }
});

test("parser: length cut inside reasoning or a call, malformed blocks, text after the calls", () => {
  const parse = (text: string) => family.parseCompletion(text, { tools, kwargs: ctx.kwargs, newId: counter() });
  assert.equal(parse("still thinking"), { content: "", reasoning_content: "still thinking", malformedToolCalls: 0 });
  const block = (name: string) =>
    `<tool_call>\n<function=${name}>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>`;
  const cut = parse(`r\n</think>\n\n${block("get_weather")}\n<tool_call>\n<function=get_we`);
  assert.equal(
    [cut.tool_calls!.length, cut.malformedToolCalls, cut.content],
    [1, 0, "\n<tool_call>\n<function=get_we"],
  );
  const junk = "<tool_call>\nno function here\n</tool_call>";
  const bad = parse(`r\n</think>\n\nSure.\n\n${junk}\n${block("get_weather")}\nDone.`);
  assert.equal([bad.content, bad.tool_calls!.length, bad.malformedToolCalls], [`Sure.\n\n${junk}\n\nDone.`, 1, 1]);
  // Thinking off: the prompt closed the block, so nothing is reasoning.
  const off = family.parseCompletion("Hello.<|im_end|>", { kwargs: { enable_thinking: false } });
  assert.equal(off, { content: "Hello.", malformedToolCalls: 0 });
});

test("drift classes: changed assistant text is soft, changed user text is hard, specials are counted", () => {
  const messages: ChatMessage[] = [...history, { role: "assistant", content: "Sunny.", reasoning_content: "r" }];
  const ids = (m: ChatMessage[]) => folder.encode(render(m, false));
  const expected = ids(messages);
  const types = (actual: number[]) => compareTrajectories(folder, family, expected, actual).map((m) => m.type);
  assert.equal(types(expected), []);
  assert.equal(types(ids([...history, { role: "assistant", content: "Sunny!", reasoning_content: "r" }])), [
    "assistant_text",
  ]);
  assert.equal(types(ids([history[0]!, { role: "user", content: "Other?" }, messages[2]!])), ["non_assistant_text"]);
  const end = expected.indexOf(IM_END);
  assert.equal(types([...expected.slice(0, end), ...expected.slice(end + 1)]), ["special_token_count"]);
  const swapped = [...expected];
  swapped[end] = folder.tokenId("<|endoftext|>")!;
  assert.equal(types(swapped), ["special_token_type"]);
});

test.run();
