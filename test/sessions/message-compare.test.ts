import { test } from "uvu";
import * as assert from "uvu/assert";
import {
  adoptStored,
  deepEqualLoose,
  matchingPrefixLength,
  messagesMatch,
  MESSAGE_MATCHERS,
} from "../../sessions/message-compare.ts";

test("null, empty string, empty list and absence match each other", () => {
  for (const a of [null, "", [], undefined]) {
    for (const b of [null, "", [], undefined]) {
      assert.ok(
        messagesMatch(
          { role: "assistant", content: a, tool_calls: b },
          { role: "assistant", content: b, tool_calls: a },
        ),
        `${a} vs ${b}`,
      );
    }
  }
  assert.not.ok(messagesMatch({ role: "assistant", content: "" }, { role: "assistant", content: " " }));
  assert.not.ok(messagesMatch({ role: "assistant", content: null }, { role: "assistant", content: "0" }));
  assert.not.ok(deepEqualLoose(0, ""), "zero is a value, not an empty one");
  assert.not.ok(deepEqualLoose(false, null));
});

test("tool-call arguments compare parsed, key order ignored", () => {
  const a = {
    role: "assistant",
    content: "",
    tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: '{"a": 1, "b": [1, 2]}' } }],
  };
  const b = {
    role: "assistant",
    content: null,
    tool_calls: [{ type: "function", function: { arguments: { b: [1, 2], a: 1 }, name: "f" }, id: "c1" }],
  };
  assert.ok(messagesMatch(a, b));
  const c = { ...b, tool_calls: [{ ...b.tool_calls[0], function: { name: "f", arguments: '{"a": 2, "b": [1, 2]}' } }] };
  assert.not.ok(messagesMatch(a, c));
  const d = { ...b, tool_calls: [{ ...b.tool_calls[0], function: { name: "f", arguments: { a: 1, b: [2, 1] } } }] };
  assert.not.ok(messagesMatch(a, d), "list order matters");
});

test("only role, content, reasoning_content and tool_calls are compared", () => {
  assert.ok(messagesMatch({ role: "user", content: "hi", name: "x", extra: 1 }, { role: "user", content: "hi" }));
  assert.not.ok(messagesMatch({ role: "user", content: "hi" }, { role: "system", content: "hi" }));
  assert.not.ok(
    messagesMatch({ role: "assistant", content: "a", reasoning_content: "r" }, { role: "assistant", content: "a" }),
  );
  assert.ok(
    messagesMatch({ role: "assistant", content: "a", reasoning_content: null }, { role: "assistant", content: "a" }),
  );
});

test("comparison never mutates its inputs", () => {
  const a = { role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: '{"x":1}' } }] };
  const snapshot = JSON.stringify(a);
  messagesMatch(a, { role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: { x: 1 } } }] });
  assert.is(JSON.stringify(a), snapshot);
});

test("matching prefix length", () => {
  const s = [
    { role: "user", content: "a" },
    { role: "assistant", content: "b" },
    { role: "tool", content: "c" },
  ];
  assert.is(matchingPrefixLength(s, s), 3);
  assert.is(matchingPrefixLength(s, [...s, { role: "tool", content: "d" }]), 3);
  assert.is(matchingPrefixLength(s, [s[0]!, { role: "assistant", content: "x" }]), 1);
  assert.is(matchingPrefixLength(s, []), 0);
});

const stored = {
  role: "assistant",
  content: "let me look",
  reasoning_content: "the weather tool",
  tool_calls: [
    { id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Paris","days":2}' } },
  ],
};

test("a tool call's index and other client-only keys never count, in any mode", () => {
  const replayed = {
    ...stored,
    tool_calls: [
      { ...stored.tool_calls[0], index: 0, extra: { x: 1 }, function: { ...stored.tool_calls[0]!.function } },
    ],
  };
  for (const matcher of MESSAGE_MATCHERS) assert.ok(messagesMatch(stored, replayed, matcher), matcher);
});

test("strict: ids, reasoning and argument values count", () => {
  const reid = { ...stored, tool_calls: [{ ...stored.tool_calls[0], id: "toolu_9" }] };
  assert.not.ok(messagesMatch(stored, reid, "strict"));
  assert.not.ok(messagesMatch(stored, { ...stored, reasoning_content: undefined }, "strict"));
  const respaced = {
    ...stored,
    tool_calls: [
      { ...stored.tool_calls[0], function: { name: "weather", arguments: '{ "days": 2, "city": "Paris" }' } },
    ],
  };
  assert.ok(messagesMatch(stored, respaced, "strict"), "a JSON object string compares parsed, as before");
});

test("loose: tool-call ids are ignored and arguments compare as JSON values; reasoning still counts", () => {
  const reid = { ...stored, tool_calls: [{ ...stored.tool_calls[0], id: "toolu_9" }] };
  assert.ok(messagesMatch(stored, reid, "loose"));
  const scalar = (args: unknown) => ({
    role: "assistant",
    content: "",
    tool_calls: [{ id: "a", type: "function", function: { name: "f", arguments: args } }],
  });
  assert.ok(messagesMatch(scalar("[1, 2]"), scalar([1, 2]), "loose"));
  assert.ok(messagesMatch(scalar('"x"'), scalar("x"), "loose"));
  assert.not.ok(messagesMatch(scalar('"x"'), scalar("x"), "strict"), "strict parses only JSON objects");
  assert.not.ok(messagesMatch(stored, { ...stored, reasoning_content: "" }, "loose"));
  const renamed = { ...reid, tool_calls: [{ ...reid.tool_calls[0], function: { name: "w", arguments: "{}" } }] };
  assert.not.ok(messagesMatch(stored, renamed, "loose"));
});

test("role-content: role, content, and the calls' names and arguments only", () => {
  const bare = {
    role: "assistant",
    content: "let me look",
    tool_calls: [{ id: "toolu_2", function: { name: "weather", arguments: { days: 2, city: "Paris" } } }],
  };
  assert.ok(messagesMatch(stored, bare, "role-content"));
  assert.not.ok(messagesMatch(stored, bare, "loose"), "loose still compares reasoning and type");
  assert.not.ok(messagesMatch(stored, { ...bare, content: "let me see" }, "role-content"));
  const other = { ...bare, tool_calls: [{ function: { name: "weather", arguments: { days: 3, city: "Paris" } } }] };
  assert.not.ok(messagesMatch(stored, other, "role-content"));
});

test("adoptStored: the matched prefix is the stored copy, and later tool results follow the stored ids", () => {
  const user = { role: "user", content: "weather?" };
  const replayed = {
    role: "assistant",
    content: "let me look",
    tool_calls: [{ id: "toolu_2", function: stored.tool_calls[0]!.function }],
  };
  const result = { role: "tool", tool_call_id: "toolu_2", content: "sunny" };
  const request = [user, replayed, result];
  const { messages, adopted } = adoptStored([user, stored], request, 2);
  assert.ok(adopted);
  assert.is(messages[1], stored);
  assert.equal(messages[2], { role: "tool", tool_call_id: "call_1", content: "sunny" });
  assert.is(request[2], result, "the request list is not changed");
  assert.equal(result.tool_call_id, "toolu_2");
  const same = adoptStored([user, stored], [{ ...user }, JSON.parse(JSON.stringify(stored))], 2);
  assert.not.ok(same.adopted, "an identical replay adopts nothing");
});

test.run();
