import { test } from "uvu";
import * as assert from "uvu/assert";
import { deepEqualLoose, matchingPrefixLength, messagesMatch } from "../../sessions/message-compare.ts";

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

test.run();
