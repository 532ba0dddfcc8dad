// The Qwen3-Coder XML tool-call syntax shared by qwen35 and nemotron3
// (sessions/families/tool-call-syntax.ts, parsed by tagged-completion.ts) and its schema typing (tool-args.ts
// qwen3CoderArgumentValue): SGLang `qwen3_coder` semantics, and the house differences
// (malformed blocks stay in the content and count, text after the calls stays).
import { test } from "uvu";
import * as assert from "uvu/assert";
import { QWEN3_FORMAT, QWEN35_FORMAT } from "../../../sessions/families/completion-formats.ts";
import { parseTagged } from "../../../sessions/families/tagged-completion.ts";
import { formatCoderCall } from "../../../sessions/families/tool-call-syntax.ts";
import { parameterTypes, qwen3CoderArgumentValue } from "../../../sessions/families/tool-args.ts";
import { tool, types } from "./family-fixtures.ts";
import { counter } from "./tito-loop.ts";

const tools = [
  tool("f", {
    ...types({ s: "string", i: "integer", n: "number", b: "boolean", o: "object", a: "array" }),
    maybe: { anyOf: [{ type: "integer" }, { type: "null" }] },
    either: { type: ["integer", "string"] },
    e: { enum: ["x", "y"] },
    untyped: { description: "no type" },
  }),
];

// Qwen3's reasoning split (the prompt opened no block) with Qwen3-Coder calls; no stop texts to cut.
const CODER = { stopTexts: [], reasoning: QWEN3_FORMAT.reasoning, toolCalls: QWEN35_FORMAT.toolCalls };
const parse = (text: string) => parseTagged(text, CODER, { tools, newId: counter() });
const args = (params: string) =>
  JSON.parse(parse(`<tool_call>\n<function=f>\n${params}</function>\n</tool_call>`).tool_calls![0]!.function.arguments);
const p = (key: string, value: string) => `<parameter=${key}>\n${value}\n</parameter>\n`;

test("values: typed by the schema; one newline stripped each side; null for any parameter", () => {
  const value = (param: string, raw: string) => qwen3CoderArgumentValue(raw, parameterTypes(tools, "f", param));
  assert.equal(
    [value("s", "42"), value("i", "42"), value("i", " -7 "), value("n", "2.5"), value("n", "1e3"), value("b", "True")],
    ["42", 42, -7, 2.5, 1000, true],
  );
  assert.equal(
    [value("b", "false"), value("o", '{"k": [1]}'), value("a", "[1, 'two']"), value("o", "{'k': None}")],
    [false, { k: [1] }, [1, "two"], { k: null }],
  );
  assert.equal(
    [value("s", "null"), value("i", "NULL"), value("unknown", "null"), value("maybe", "5")],
    [null, null, null, 5],
  );
  assert.equal(
    [value("either", "5"), value("e", "x"), value("untyped", "5"), value("unknown", "5")],
    ["5", "x", "5", "5"],
  );
  // What the type does not read stays the text the model wrote (SGLang makes a bad boolean false).
  assert.equal(
    [value("i", "many"), value("i", "4.0"), value("n", "lots"), value("b", "yes"), value("o", "{oops")],
    ["many", "4.0", "lots", "yes", "{oops"],
  );
  assert.equal(args(p("s", "\n two lines \n") + p("i", "3")), { s: "\n two lines \n", i: 3 });
});

test("lenient structure: an unclosed parameter ends at the next one or the function's end; several functions per block", () => {
  assert.equal(args("<parameter=s>\nA\n<parameter=i>\n1\n"), { s: "A", i: 1 });
  assert.equal(args("<parameter=s>A</parameter><parameter=bad value</parameter>"), { s: "A" });
  const two = parse(
    "<tool_call>\n<function=f>\n<parameter=i>\n1\n</parameter>\n</function>\n<function=g>\n<parameter=x>\ny\n</parameter>\n</function>\n</tool_call>",
  );
  assert.equal(
    two.tool_calls!.map((c) => [c.function.name, c.function.arguments]),
    [
      ["f", '{"i":1}'],
      ["g", '{"x":"y"}'],
    ],
    "an undeclared tool is kept, its values strings",
  );
  const unclosed = parse("<tool_call>\n<function=f>\n<parameter=i>\n2\n</tool_call>");
  assert.is(unclosed.tool_calls![0]!.function.arguments, '{"i":2}');
  const proto = parse("<tool_call>\n<function=f>\n<parameter=__proto__>\nx\n</parameter>\n</function>\n</tool_call>");
  assert.is(proto.tool_calls![0]!.function.arguments, '{"__proto__":"x"}');
});

test("content: the text before the first call, not trimmed; whitespace between calls dropped, other text kept", () => {
  const call = "<tool_call>\n<function=f>\n</function>\n</tool_call>";
  const r = parse(`<think>\nhmm\n</think>\n\nLet me see.\n\n${call}\n${call}\n`);
  assert.equal(
    [r.reasoning_content, r.content, r.tool_calls!.length, r.malformedToolCalls],
    ["hmm", "Let me see.\n\n", 2, 0],
  );
  assert.is(r.tool_calls![0]!.function.arguments, "{}");
  assert.is(parse(`${call}\nAfter.`).content, "\nAfter.");
  assert.equal(parse("No calls here.  "), { content: "No calls here.", malformedToolCalls: 0 });
});

test("malformed: a block with no function counts and stays; a reopened block counts; a cut one does not", () => {
  const good = "<tool_call>\n<function=f>\n<parameter=i>\n1\n</parameter>\n</function>\n</tool_call>";
  const none = parse(`A <tool_call>\njust text\n</tool_call> B`);
  assert.equal(none, { content: "A <tool_call>\njust text\n</tool_call> B", malformedToolCalls: 1 });
  const noName = parse(`<tool_call>\n<function=>\n</function>\n</tool_call>`);
  assert.equal(noName.malformedToolCalls, 1);
  const reopened = parse(`<tool_call>\n<function=f\n${good}`);
  assert.equal(
    [reopened.content, reopened.tool_calls!.length, reopened.malformedToolCalls],
    ["<tool_call>\n<function=f\n", 1, 1],
  );
  const cut = parse(`Hi.\n${good}\n<tool_call>\n<function=f>\n<parameter=i>\n`);
  assert.equal(
    [cut.content, cut.tool_calls!.length, cut.malformedToolCalls],
    ["Hi.\n\n<tool_call>\n<function=f>\n<parameter=i>", 1, 0],
  );
});

test("formatCoderCall writes strings raw and other values as JSON, in the templates' layout", () => {
  assert.is(
    formatCoderCall({ function: { name: "f", arguments: '{"s": "a b", "i": 2, "o": {"k": [1, true]}, "z": null}' } }),
    "<tool_call>\n<function=f>\n<parameter=s>\na b\n</parameter>\n<parameter=i>\n2\n</parameter>\n" +
      '<parameter=o>\n{"k": [1, true]}\n</parameter>\n<parameter=z>\nnull\n</parameter>\n</function>\n</tool_call>',
  );
});

test.run();
