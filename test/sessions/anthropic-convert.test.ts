// The Anthropic Messages <-> chat conversion on its own: requests (system, text, thinking,
// tool_use and tool_result blocks, tools, sampling fields, what it refuses), replies
// (blocks, stop reasons, usage), the round trip a harness makes with a reply's blocks, the
// stream events of a reply's chunks, and the error shape.
import { test } from "uvu";
import * as assert from "uvu/assert";
import {
  anthropicErrorBody,
  AnthropicEvents,
  chatToMessage,
  messagesToChat,
} from "../../sessions/anthropic-convert.ts";
import { InvalidMessagesRequestError } from "../../sessions/errors.ts";
import { messagesMatch } from "../../sessions/message-compare.ts";
import { ChatChunks } from "../../engine/chat-chunks.ts";

const WEATHER = {
  name: "get_weather",
  description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } } },
};

test("a request: system, user text, tool_use and tool_result blocks, tools and sampling fields", () => {
  const converted = messagesToChat({
    model: "m",
    max_tokens: 100,
    temperature: 0.5,
    top_p: 0.9,
    top_k: 20,
    stop_sequences: ["END"],
    system: [
      { type: "text", text: "You are " },
      { type: "text", text: "helpful.", cache_control: { type: "ephemeral" } },
    ],
    tools: [WEATHER],
    tool_choice: { type: "tool", name: "get_weather" },
    messages: [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "Use the tool.", signature: "" },
          { type: "text", text: "Let me look." },
          { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "call_1", content: [{ type: "text", text: "21C" }] },
          { type: "text", text: "And tomorrow?" },
        ],
      },
    ],
  });
  assert.equal(converted.chat, {
    model: "m",
    messages: [
      { role: "system", content: "You are helpful." },
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: "Let me look.",
        reasoning_content: "Use the tool.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "21C" },
      { role: "user", content: "And tomorrow?" },
    ],
    tools: [
      {
        type: "function",
        function: { name: "get_weather", parameters: WEATHER.input_schema, description: "Weather for a city" },
      },
    ],
    tool_choice: { type: "function", function: { name: "get_weather" } },
    max_tokens: 100,
    temperature: 0.5,
    top_p: 0.9,
    top_k: 20,
    stop: ["END"],
  });
  assert.equal([converted.stream, converted.stopSequences, converted.model], [false, ["END"], "m"]);
});

test("stream: true asks for the usage chunk too", () => {
  const { chat, stream } = messagesToChat({ stream: true, messages: [{ role: "user", content: "hi" }] });
  assert.ok(stream);
  assert.equal([chat.stream, chat.stream_options], [true, { include_usage: true }]);
  assert.equal(
    messagesToChat({ messages: [{ role: "user", content: "hi" }], tool_choice: { type: "any" } }).chat.tool_choice,
    "required",
  );
});

test("what it refuses is a 400 that names the place", () => {
  const refused = (body: unknown, pattern: RegExp) => {
    try {
      messagesToChat(body);
      assert.unreachable(JSON.stringify(body));
    } catch (err) {
      assert.instance(err, InvalidMessagesRequestError);
      assert.is((err as InvalidMessagesRequestError).status, 400);
      assert.match((err as Error).message, pattern);
    }
  };
  refused([], /JSON object/);
  refused({ messages: [] }, /non-empty `messages`/);
  refused({ messages: [{ role: "system", content: "x" }] }, /messages\[0\]\.role must be "user" or "assistant"/);
  refused(
    { messages: [{ role: "user", content: [{ type: "image", source: {} }] }] },
    /messages\[0\]\.content\[0\]: a user message takes text and tool_result blocks, not image/,
  );
  refused(
    {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "tool_result", tool_use_id: "x", content: "" },
          ],
        },
      ],
    },
    /tool_result blocks come before any text/,
  );
  refused(
    {
      messages: [
        { role: "user", content: "x" },
        { role: "assistant", content: [{ type: "tool_use", name: "f" }] },
        { role: "user", content: "y" },
      ],
    },
    /messages\[1\]\.content\[0\]: a tool_use block needs a string id and name/,
  );
  refused(
    {
      messages: [
        { role: "user", content: "x" },
        { role: "assistant", content: "The answer is" },
      ],
    },
    /the last message must be a user message: an assistant prefill is not supported/,
  );
  refused(
    { messages: [{ role: "user", content: "x" }], tools: [{ type: "bash_20250124", name: "bash" }] },
    /server tools/,
  );
  refused({ messages: [{ role: "user", content: "x" }], max_tokens: "10" }, /`max_tokens` must be a number/);
  refused({ messages: [{ role: "user", content: "x" }], stop_sequences: "END" }, /list of strings/);
});

const reply = (message: Record<string, unknown>, finish: string, extra: Record<string, unknown> = {}) => ({
  id: "chatcmpl-abc",
  object: "chat.completion",
  model: "engine-model",
  choices: [{ index: 0, message, finish_reason: finish, ...extra }],
  usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
});
const plain = messagesToChat({ model: "m", messages: [{ role: "user", content: "x" }], stop_sequences: ["END"] });

test("a reply: thinking, text and tool_use blocks with parsed input; usage; the request's model", () => {
  const message = {
    role: "assistant",
    content: "Let me look.",
    reasoning_content: "Use the tool.",
    tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } }],
  };
  assert.equal(chatToMessage(reply(message, "tool_calls"), plain), {
    id: "msg_abc",
    type: "message",
    role: "assistant",
    model: "m",
    content: [
      { type: "thinking", thinking: "Use the tool.", signature: "" },
      { type: "text", text: "Let me look." },
      { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
    ],
    stop_reason: "tool_use",
    stop_sequence: null,
    usage: { input_tokens: 12, output_tokens: 7 },
  });
  const empty = chatToMessage(reply({ role: "assistant", content: "" }, "stop"), plain);
  assert.equal(empty.content, []);
});

test("stop reasons: tool_use, max_tokens, stop_sequence (a named stop string of the request), end_turn", () => {
  const stopOf = (finish: string, matched?: unknown) => {
    const m = chatToMessage(reply({ role: "assistant", content: "a" }, finish, { matched_stop: matched }), plain);
    return [m.stop_reason, m.stop_sequence];
  };
  assert.equal(stopOf("tool_calls"), ["tool_use", null]);
  assert.equal(stopOf("length"), ["max_tokens", null]);
  assert.equal(stopOf("stop", "END"), ["stop_sequence", "END"]);
  assert.equal(stopOf("stop", 151645), ["end_turn", null], "a stop token");
  assert.equal(stopOf("stop", "OTHER"), ["end_turn", null], "not one of the request's");
  assert.equal(stopOf("stop"), ["end_turn", null]);
  const sglang = chatToMessage(reply({ role: "assistant", content: "a" }, "stop", { matched_stop: "END" }), plain);
  assert.equal([sglang.stop_reason, sglang.stop_sequence], ["stop_sequence", "END"]);
  const vllm = chatToMessage(reply({ role: "assistant", content: "a" }, "stop", { stop_reason: "END" }), plain);
  assert.equal([vllm.stop_reason, vllm.stop_sequence], ["stop_sequence", "END"]);
});

test("a reply's blocks sent back as history are the stored assistant message again (strict)", () => {
  const stored = {
    role: "assistant",
    content: "\n\nLet me look.",
    reasoning_content: "Use the tool.",
    tool_calls: [
      { id: "call_9", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris","n":2}' } },
    ],
  };
  const sent = chatToMessage(reply(stored, "tool_calls"), plain);
  const history = [
    { role: "user", content: "Weather?" },
    { role: "assistant", content: sent.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "call_9", content: "21C" }] },
  ];
  const back = messagesToChat({ messages: history }).chat.messages as Record<string, unknown>[];
  assert.ok(messagesMatch(stored, { ...back[1]!, role: "assistant" }, "strict"));
});

/** Parses Anthropic SSE bytes into [event name, data] pairs, checking the name is the data's type. */
function parseEvents(buffers: Buffer[]): Record<string, unknown>[] {
  return Buffer.concat(buffers)
    .toString("utf8")
    .split("\n\n")
    .filter((e) => e !== "")
    .map((e) => {
      const [name, data] = e.split("\n");
      const value = JSON.parse(data!.slice("data: ".length)) as Record<string, unknown>;
      assert.is(name, `event: ${String(value.type)}`);
      return value;
    });
}

test("a reply's chunks as Anthropic's events: blocks opened and closed in order, then delta and stop", () => {
  const chunks = new ChatChunks({ id: "chatcmpl-s1", created: 1, model: "engine-model" });
  const sse = [
    chunks.role(),
    ...chunks.delta({ reasoning: "Use ", content: "", toolCalls: [] }),
    ...chunks.delta({ reasoning: "the tool.", content: "Let me look.", toolCalls: [] }),
    ...chunks.delta({
      reasoning: "",
      content: "",
      toolCalls: [
        { index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
      ],
    }),
    chunks.finish("tool_calls"),
    chunks.usage({ prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 }),
  ];
  const out = new AnthropicEvents(plain);
  const buffers: Buffer[] = [];
  for (const b of sse) buffers.push(...out.chunk(JSON.parse(b.toString("utf8").slice("data: ".length))));
  buffers.push(...out.end());
  const events = parseEvents(buffers);
  assert.equal(
    events.map((e) => e.type),
    [
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ],
  );
  const start = events[0]!.message as Record<string, unknown>;
  assert.equal([start.id, start.model, start.content], ["msg_s1", "m", []]);
  assert.equal(events[1], {
    type: "content_block_start",
    index: 0,
    content_block: { type: "thinking", thinking: "", signature: "" },
  });
  assert.equal(events[3], {
    type: "content_block_delta",
    index: 0,
    delta: { type: "thinking_delta", thinking: "the tool." },
  });
  assert.equal(events[6], {
    type: "content_block_delta",
    index: 1,
    delta: { type: "text_delta", text: "Let me look." },
  });
  assert.equal(events[8], {
    type: "content_block_start",
    index: 2,
    content_block: { type: "tool_use", id: "call_1", name: "get_weather", input: {} },
  });
  assert.equal(events[9], {
    type: "content_block_delta",
    index: 2,
    delta: { type: "input_json_delta", partial_json: '{"city":"Paris"}' },
  });
  assert.equal(events[11], {
    type: "message_delta",
    delta: { stop_reason: "tool_use", stop_sequence: null },
    usage: { input_tokens: 12, output_tokens: 7 },
  });
});

test("an empty reply still starts and stops its message", () => {
  const out = new AnthropicEvents(plain);
  assert.equal(
    parseEvents(out.end()).map((e) => e.type),
    ["message_start", "message_delta", "message_stop"],
  );
});

test("errors in Anthropic's shape, typed by status", () => {
  assert.equal(anthropicErrorBody(400, "bad"), {
    type: "error",
    error: { type: "invalid_request_error", message: "bad" },
  });
  const types = [401, 403, 404, 409, 413, 429, 500, 502, 503, 504].map((s) => anthropicErrorBody(s, "").error);
  assert.equal(
    types.map((t) => (t as { type: string }).type),
    [
      "authentication_error",
      "permission_error",
      "not_found_error",
      "invalid_request_error",
      "request_too_large",
      "rate_limit_error",
      "api_error",
      "api_error",
      "overloaded_error",
      "timeout_error",
    ],
  );
});

test.run();
