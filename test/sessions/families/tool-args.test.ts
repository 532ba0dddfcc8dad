// Schema-typed XML argument values (sessions/families/tool-args.ts): the parameter types a
// request's tools declare, GLM's and MiniMax's conversions, Python literals, template JSON.
import { test } from "uvu";
import * as assert from "uvu/assert";
import {
  argumentsObject,
  glmArgumentValue,
  isDeclaredTool,
  minimaxArgumentValue,
  parameterTypes,
  pythonLiteral,
  templateJson,
} from "../../../sessions/families/tool-args.ts";
import { tool } from "./family-fixtures.ts";

const tools = [
  tool("f", {
    s: { type: "string" },
    n: { type: ["integer", "null"] },
    u: { oneOf: [{ type: "number" }, { type: "string" }] },
    e: { enum: [1, "a", null] },
    c: { const: true },
    none: { description: "no type" },
  }),
  { name: "bare", parameters: { properties: { x: { type: "Boolean" } } } },
];

test("parameter types: type, type lists, enum/const values, unions; nothing for the undeclared", () => {
  assert.equal(parameterTypes(tools, "f", "s"), ["string"]);
  assert.equal(parameterTypes(tools, "f", "n"), ["integer", "null"]);
  assert.equal(parameterTypes(tools, "f", "u"), ["number", "string"]);
  assert.equal(parameterTypes(tools, "f", "e"), ["integer", "string", "null"]);
  assert.equal(parameterTypes(tools, "f", "c"), ["boolean"]);
  assert.equal(parameterTypes(tools, "f", "none"), []);
  assert.equal(parameterTypes(tools, "f", "missing"), []);
  assert.equal(parameterTypes(tools, "bare", "x"), ["boolean"], "a bare function, type lower-cased");
  assert.equal(parameterTypes(undefined, "f", "s"), []);
  assert.ok(isDeclaredTool(tools, "bare"));
  assert.not.ok(isDeclaredTool(tools, "g"));
  assert.ok(isDeclaredTool(undefined, "g") && isDeclaredTool([], "g"), "nothing declared: every call counts");
});

test("GLM values: strings raw; JSON, escaped JSON, Python literals; quoted numbers for numeric types", () => {
  assert.is(glmArgumentValue(' "x" ', ["string"]), ' "x" ');
  assert.equal(glmArgumentValue('{"a": 1}', ["object"]), { a: 1 });
  assert.equal(glmArgumentValue('{\\"a\\": 1}', ["object"]), { a: 1 }, "escaped JSON");
  assert.equal(glmArgumentValue("['a', (1, 2.5), None]", ["array"]), ["a", [1, 2.5], null]);
  assert.is(glmArgumentValue("True", ["boolean"]), true);
  assert.is(glmArgumentValue("True", []), "True", "no declared type: no Python literals");
  assert.is(glmArgumentValue('"7"', ["integer"]), 7);
  assert.is(glmArgumentValue('"7.5"', ["integer"]), "7.5", "not an integer");
  assert.is(glmArgumentValue('"7.5"', ["number", "integer"]), 7.5);
  assert.is(glmArgumentValue("oops{", ["object"]), "oops{");
  assert.is(glmArgumentValue("12", []), 12);
});

test("MiniMax values: null words, the first type that reads, then JSON, then text", () => {
  for (const word of ["null", "None", "NIL"]) assert.is(minimaxArgumentValue(word, ["string"]), null);
  assert.is(minimaxArgumentValue("12", []), "12", "undeclared: a string");
  assert.is(minimaxArgumentValue(" 12 ", ["integer"]), 12);
  assert.is(minimaxArgumentValue("3.0", ["number"]), 3);
  assert.is(minimaxArgumentValue("1e3", ["number"]), 1000);
  assert.is(minimaxArgumentValue("0x10", ["number"]), "0x10");
  assert.is(minimaxArgumentValue("off", ["boolean"]), false);
  assert.is(minimaxArgumentValue("maybe", ["boolean"]), "maybe");
  assert.equal(minimaxArgumentValue("[1, 2]", ["array"]), [1, 2]);
  assert.is(minimaxArgumentValue("5", ["string", "integer"]), 5, "integer before string");
  assert.equal(minimaxArgumentValue('{"a":1}', ["weird"]), { a: 1 }, "no known type: JSON");
  assert.is(minimaxArgumentValue("plain", ["weird"]), "plain");
});

test("Python literals: nesting, quotes and escapes, trailing commas; anything else is not one", () => {
  assert.equal(pythonLiteral("{'a': [1, -2e3, .5], \"b\": ('x',), 3: False,}"), {
    value: { a: [1, -2000, 0.5], b: ["x"], "3": false },
  });
  assert.equal(pythonLiteral("'it\\'s\\n'"), { value: "it's\n" });
  assert.equal(pythonLiteral("[]"), { value: [] });
  for (const bad of ["", "[1, 2", "{'a' 1}", "foo", "1 2", "'open", "{[1]: 2}"])
    assert.is(pythonLiteral(bad), undefined, bad);
});

test("template JSON: Python separators, non-ASCII kept; arguments as an object", () => {
  assert.is(templateJson({ a: [1, "é", null], b: { c: true } }), '{"a": [1, "é", null], "b": {"c": true}}');
  assert.equal(argumentsObject('{"x": 1}'), { x: 1 });
  assert.equal(argumentsObject("[1]"), {});
  assert.equal(argumentsObject("not json"), {});
  assert.equal(argumentsObject({ y: 2 }), { y: 2 });
});

test.run();
