// The values a chat template sees, as Python's jinja2 would see them (issue 39): numbers
// that print as Python prints them (a float `30.0` stays a float and prints `30.0`, `1e-07`
// prints `1e-07`, an integer past 2^53 keeps its digits), objects with their keys in the
// order the request wrote them (lossless-json.ts), and `tojson` as transformers' override
// writes it: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
// (src/transformers/utils/chat_template_utils.py, huggingface/transformers@5e43e2e8).
// @huggingface/jinja does not export its value classes, so they are taken from values it makes.
import { Environment } from "@huggingface/jinja";
import { sourceKeyOrder, sourceNumber } from "./lossless-json.ts";
import { pyFloatRepr } from "./python-text.ts";

/** A runtime value of @huggingface/jinja: its type name and JavaScript payload. */
export interface Value {
  type: string;
  value: unknown;
  toString(): string;
  readonly builtins: Map<string, Value>;
}
type ValueClass = new (value?: unknown) => Value;
export type JinjaFunction = (args: Value[], scope: Environment) => Value;

const probe = new Environment();
probe.set("v", { s: "", i: 1, f: 1.5, b: true, n: null, a: [], o: {}, fn: () => 1 });
const sample = probe.lookupVariable("v") as unknown as Value;
const member = (key: string) => (sample.value as Map<string, Value>).get(key)!.constructor as ValueClass;

export const ObjectValue = sample.constructor as ValueClass;
export const StringValue = member("s");
export const IntegerValue = member("i");
export const FloatValue = member("f");
export const BooleanValue = member("b");
export const NullValue = member("n");
export const ArrayValue = member("a");
export const FunctionValue = member("fn") as new (fn: JinjaFunction) => Value;
export const UndefinedValue = probe.lookupVariable("not_declared").constructor as ValueClass;

/** A float that prints as Python's repr. */
class PyFloat extends FloatValue {
  override toString(): string {
    return pyFloatRepr(this.value as number);
  }
}

/** An integer read from text with more digits than a double holds: prints its digits. */
class PyBigInt extends IntegerValue {
  readonly digits: string;
  constructor(digits: string) {
    super(Number(digits));
    this.digits = digits;
  }
  override toString(): string {
    return this.digits;
  }
}

const FLOAT_LEXEME = /[.eE]/;

function numberValue(n: number, lexeme: string | undefined): Value {
  if (lexeme !== undefined) {
    if (FLOAT_LEXEME.test(lexeme)) return new PyFloat(n);
    const digits = /^-0+$/.test(lexeme) ? "0" : lexeme;
    return Number.isSafeInteger(n) ? new IntegerValue(n) : new PyBigInt(digits);
  }
  return Number.isInteger(n) ? new IntegerValue(n) : new PyFloat(n);
}

/**
 * A JavaScript value as a template value. Functions get the argument values' payloads, as
 * @huggingface/jinja passes them; a `JinjaFunction` marked by `raw` gets the values.
 */
export function toValue(input: unknown, lexeme?: string): Value {
  switch (typeof input) {
    case "number":
      return numberValue(input, lexeme);
    case "string":
      return new StringValue(input);
    case "boolean":
      return new BooleanValue(input);
    case "undefined":
      return new UndefinedValue();
    case "function": {
      const fn = input as (...args: unknown[]) => unknown;
      if (RAW.has(fn)) return new FunctionValue(fn as unknown as JinjaFunction);
      return new FunctionValue((args) => toValue(fn(...args.map((x) => x.value)) ?? null));
    }
    case "object": {
      if (input === null) return new NullValue();
      if (Array.isArray(input)) return new ArrayValue(input.map((v, i) => toValue(v, sourceNumber(input, i))));
      const obj = input as Record<string, unknown>;
      const keys = sourceKeyOrder(obj) ?? Object.keys(obj);
      return new ObjectValue(new Map(keys.map((k) => [k, toValue(obj[k], sourceNumber(obj, k))])));
    }
    default:
      throw new Error(`cannot pass a ${typeof input} to a chat template`);
  }
}

const RAW = new WeakSet<object>();

/** Marks a function that takes and returns template values (a filter or method override). */
export function raw(fn: JinjaFunction): JinjaFunction {
  RAW.add(fn);
  return fn;
}

export interface DumpOptions {
  indent: string | null;
  ensureAscii: boolean;
  itemSeparator: string;
  keySeparator: string;
  sortKeys: boolean;
}

const NON_ASCII = /[^\x20-\x7e]/g;
const asciiSafe = (json: string) =>
  json.replace(NON_ASCII, (c) => (c < " " ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`));

/** A JSON string as Python writes it (JSON.stringify escapes the same characters the same way). */
function dumpString(s: string, options: DumpOptions): string {
  const json = JSON.stringify(s);
  return options.ensureAscii ? asciiSafe(json) : json;
}

/** Python compares str keys by code point; JavaScript's default sort compares UTF-16 units. */
function byCodePoint(a: string, b: string): number {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function dumpNumber(v: Value): string {
  if (v instanceof PyBigInt) return v.digits;
  const n = v.value as number;
  if (v instanceof IntegerValue) return String(n);
  if (Number.isNaN(n)) return "NaN";
  if (!Number.isFinite(n)) return n > 0 ? "Infinity" : "-Infinity";
  return pyFloatRepr(n);
}

/** json.dumps of a template value; a value json.dumps cannot write throws, as it does in Python. */
export function pyJsonDumps(v: Value, options: DumpOptions, depth = 0): string {
  switch (v.type) {
    case "NullValue":
      return "null";
    case "BooleanValue":
      return v.value ? "true" : "false";
    case "IntegerValue":
    case "FloatValue":
      return dumpNumber(v);
    case "StringValue":
      return dumpString(v.value as string, options);
    case "ArrayValue":
    case "TupleValue":
    case "ObjectValue":
    case "KeywordArgumentsValue": {
      const isArray = v.type === "ArrayValue" || v.type === "TupleValue";
      const items = isArray
        ? (v.value as Value[]).map((x) => pyJsonDumps(x, options, depth + 1))
        : sortedEntries(v.value as Map<string, Value>, options).map(
            ([k, x]) => `${dumpString(k, options)}${options.keySeparator}${pyJsonDumps(x, options, depth + 1)}`,
          );
      const [open, close] = isArray ? ["[", "]"] : ["{", "}"];
      if (items.length === 0) return open + close;
      if (options.indent === null) return open + items.join(options.itemSeparator) + close;
      const inner = "\n" + options.indent.repeat(depth + 1);
      const outer = "\n" + options.indent.repeat(depth);
      return open + inner + items.join(options.itemSeparator + inner) + outer + close;
    }
    default:
      throw new TypeError(`Object of type ${v.type.replace(/Value$/, "")} is not JSON serializable`);
  }
}

function sortedEntries(map: Map<string, Value>, options: DumpOptions): Array<[string, Value]> {
  const entries = [...map.entries()];
  return options.sortKeys ? entries.sort(([a], [b]) => byCodePoint(a, b)) : entries;
}
