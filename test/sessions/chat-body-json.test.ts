// parseChatJson (sessions/chat-body-json.ts) reads a chat body's messages one by one: its
// value, numbers' lexemes and key orders (what lossless-json.ts keeps) and its errors must
// be exactly those of parseJsonLossless over the whole body, for every shape of body.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { parseChatJson } from "../../sessions/chat-body-json.ts";
import { parseJsonLossless, sourceKeyOrder, sourceNumber, stringifyLossless } from "../../sessions/lossless-json.ts";

function whole(text: string): { value?: unknown; error?: string } {
  try {
    return { value: parseJsonLossless(text) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

function pieces(text: string): { value?: unknown; error?: string } {
  try {
    return { value: parseChatJson(Buffer.from(text, "utf8")) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

function same(text: string): void {
  const a = whole(text);
  const b = pieces(text);
  assert.is(b.error, a.error, `error of ${text}`);
  if (a.error !== undefined) return;
  assert.equal(b.value, a.value, `value of ${text}`);
  assert.is(stringifyLossless(b.value), stringifyLossless(a.value), `lexemes and key order of ${text}`);
}

const BODIES = [
  `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":32}`,
  ` {"messages" : [ {"role":"user","content":"1.5 and 1e5 and 12345678901234567890"} , {"role":"assistant","content":""}] ,"temperature":0.70} `,
  `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{"x":30.0,"y":1e-07,"z":12345678901234567890}}}]}]}`,
  `{"messages":[{"role":"user","content":"x","z":1,"10":2,"2":{"b":1,"1":0}}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"number","default":1.0}}}}}]}`,
  `{"messages":[{"role":"user","content":"caf\\u00e9 \\"quoted\\" \\\\ back"},{"role":"user","content":"日本語 ✓ 😀"}]}`,
  `{"messages":[]}`,
  `{"messages":{"role":"user"}}`,
  `{"messages":[1.0, {"role":"user","content":"x"}]}`,
  `{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}`,
  `{"messag\\u0065s":[{"role":"user","content":"escaped key"}]}`,
  `{"model":"m"}`,
  `{"messages":[{"role":"user","content":"a"},]}`,
  `{"messages":[{"role":"user","content":"a"} {"role":"user"}]}`,
  `{"messages":[{"role":"user","content":"a\u0001"}]}`,
  `{"messages":[{"role":"user","content":"a"}]} trailing`,
  `{"messages":[{"role":"user","content":"unterminated}]}`,
  `{"messages":[{"role":"user","content":"a"}],"max_tokens":1.50,}`,
  `{"messages":[{"role":"user","content":"a","__proto__":{"x":1}}]}`,
  `[{"messages":[]}]`,
  `"messages"`,
  ``,
];

test("every body parses to what parseJsonLossless gives, or fails with its error", () => {
  for (const text of BODIES) same(text);
});

test("a long history: the same value, lexemes and key orders as the whole body's parse", () => {
  const messages: unknown[] = [{ role: "system", content: "You are 1.0 helpful." }];
  for (let k = 0; k < 200; k++) {
    messages.push({ role: "tool", tool_call_id: `c${k}`, content: `Result ${k}:\n${"word 3.14 ".repeat(200)}` });
    messages.push({ role: "assistant", content: `ok ${k}` });
  }
  const text = JSON.stringify({ model: "m", messages, max_tokens: 32 }).replace('"max_tokens":32', '"max_tokens":32.0');
  same(text);
  const value = parseChatJson(Buffer.from(text)) as { messages: unknown[] };
  assert.is(sourceNumber(value, "max_tokens"), "32.0", "the rest of the body keeps its lexemes");
});

test("a message's own lexemes and key order are kept on its objects", () => {
  const text = `{"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"b":2.50,"7":1}}}]}]}`;
  const value = parseChatJson(Buffer.from(text)) as {
    messages: [{ tool_calls: [{ function: { arguments: Record<string, unknown> } }] }];
  };
  const args = value.messages[0].tool_calls[0].function.arguments;
  assert.is(sourceNumber(args, "b"), "2.50");
  assert.equal(sourceKeyOrder(args), ["b", "7"]);
});

test.run();
