// Round trips of parsed Qwen3 completions through the real chat template: the message the
// server builds from a completion must render as the very text the model generated, or the
// client's next request (which sends that message back) describes a different history than
// the trajectory holds. Cases the template cannot reproduce are pinned at the end, with
// what it renders instead.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { renderChat, type ChatMessage } from "../../sessions/chat-template.ts";
import { QWEN3_FORMAT } from "../../sessions/families/completion-formats.ts";
import { parseTagged } from "../../sessions/families/tagged-completion.ts";
import { qwen3, WEATHER_TOOL } from "./fixtures.ts";

const folder = qwen3();
const tools = [WEATHER_TOOL];
const history: ChatMessage[] = [
  { role: "system", content: "You are a weather bot." },
  { role: "user", content: "Weather in Paris and Rome?" },
];
const prompt = renderChat(folder, history, { addGenerationPrompt: true, tools });
const PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const ROME = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}\n</tool_call>';

/** The assistant message as a client gets it (and sends it back next turn). */
function messageOf(completion: string): ChatMessage {
  let n = 0;
  const parsed = parseTagged(completion, QWEN3_FORMAT, { newId: () => `call_${++n}` });
  const message: ChatMessage = { role: "assistant", content: parsed.content };
  if (parsed.reasoning_content !== undefined) message.reasoning_content = parsed.reasoning_content;
  if (parsed.tool_calls) message.tool_calls = parsed.tool_calls;
  return message;
}

/**
 * Renders the parsed message after the history: as the last message, and followed by a tool
 * result with the next generation prompt (the next turn's render). `opened` is what the
 * generation prompt would have opened itself ("<think>\n" for templates that open it).
 */
function roundTrip(completion: string, opened = "") {
  const generated = prompt + opened + completion.replace(/<\|im_end\|>$/, "") + "<|im_end|>\n";
  const message = messageOf(completion);
  const last = renderChat(folder, [...history, message], { addGenerationPrompt: false, tools });
  const next = renderChat(folder, [...history, message, { role: "tool", tool_call_id: "call_1", content: "sunny" }], {
    addGenerationPrompt: true,
    tools,
  });
  return { generated, last, next };
}

const MATCHING: Record<string, [string, string?]> = {
  "reasoning and content": ["<think>\nThe user wants weather.\n</think>\n\nIt is sunny.<|im_end|>"],
  "no stop text in the completion": ["<think>\nr\n</think>\n\nIt is sunny."],
  "a tool call": [`<think>\nneed a tool\n</think>\n\n${PARIS}<|im_end|>`],
  "content and a tool call": [`<think>\nneed a tool\n</think>\n\nLet me check.\n${PARIS}<|im_end|>`],
  "reasoning, content and two calls": [`<think>\ntwo cities\n</think>\n\nChecking both.\n${PARIS}\n${ROME}<|im_end|>`],
  "a malformed block, then a good call": [
    `<think>\nr\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>\n${PARIS}<|im_end|>`,
  ],
  "a malformed block alone": ['<think>\nr\n</think>\n\n<tool_call>\n{"name": "get_weather"}\n</tool_call><|im_end|>'],
  "non-ASCII arguments, as the model writes them": [
    '<think>\nr\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call><|im_end|>',
  ],
  "the prompt opened <think>": ["need a tool\n</think>\n\nLet me check.\n" + PARIS + "<|im_end|>", "<think>\n"],
};

for (const [name, [completion, opened]] of Object.entries(MATCHING)) {
  test(`round trip: ${name}`, () => {
    const { generated, last, next } = roundTrip(completion, opened);
    assert.is(last, generated, "as the last message");
    assert.ok(next.startsWith(generated), `followed by a tool result:\n${JSON.stringify(next.slice(prompt.length))}`);
  });
}

// What the template writes instead of the model's text, where it cannot reproduce it.
const DIFFERING: Array<[string, string, string, "last" | "next"]> = [
  [
    // The stock Qwen3 template writes an empty think block only for the conversation's last message.
    "an empty think block, once the assistant is no longer last",
    "<think>\n\n</think>\n\nIt is sunny.<|im_end|>",
    "It is sunny.<|im_end|>\n",
    "next",
  ],
  [
    // The template puts exactly one newline between content and the first call.
    "two newlines between content and the first call",
    `<think>\nr\n</think>\n\nLet me check.\n\n${PARIS}<|im_end|>`,
    `<think>\nr\n</think>\n\nLet me check.\n${PARIS}<|im_end|>\n`,
    "last",
  ],
  [
    // Arguments are rendered with tojson's ", " and ": " separators.
    "compact tool-call JSON",
    '<think>\nr\n</think>\n\n<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris"}}\n</tool_call><|im_end|>',
    `<think>\nr\n</think>\n\n${PARIS}<|im_end|>\n`,
    "last",
  ],
  [
    // JSON numbers lose their spelling: 1.0 parses to 1.
    "a float argument written 1.0",
    '<think>\nr\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"days": 1.0}}\n</tool_call><|im_end|>',
    '<think>\nr\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"days": 1}}\n</tool_call><|im_end|>\n',
    "last",
  ],
  [
    "a \\u escape in the arguments",
    '<think>\nr\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Z\\u00fcrich"}}\n</tool_call><|im_end|>',
    '<think>\nr\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call><|im_end|>\n',
    "last",
  ],
  [
    // The content is trimmed (as SGLang does).
    "whitespace at the end of the content",
    "<think>\nr\n</think>\n\nIt is sunny.\n<|im_end|>",
    "<think>\nr\n</think>\n\nIt is sunny.<|im_end|>\n",
    "last",
  ],
  [
    // The template renders content before the calls.
    "text after the tool calls",
    `<think>\nr\n</think>\n\n${PARIS}\nDone.<|im_end|>`,
    `<think>\nr\n</think>\n\nDone.\n${PARIS}<|im_end|>\n`,
    "last",
  ],
  [
    // Only with finish_reason "length", which a next turn cannot extend anyway.
    "reasoning cut short by the length limit",
    "<think>\nstill thinking",
    "<think>\nstill thinking\n</think>\n\n<|im_end|>\n",
    "last",
  ],
];

for (const [name, completion, rendered, where] of DIFFERING) {
  test(`known difference: ${name}`, () => {
    const { generated, last, next } = roundTrip(completion);
    // Both renders start with the prompt, generation prompt included: the assistant follows.
    const got = (where === "last" ? last : next).slice(prompt.length);
    assert.is(got.slice(0, rendered.length), rendered);
    assert.is.not(where === "last" ? last : next.slice(0, generated.length), generated);
  });
}

test.run();
