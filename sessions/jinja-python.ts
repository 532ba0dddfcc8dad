// @huggingface/jinja set up as transformers sets up jinja2 for chat templates
// (src/transformers/utils/chat_template_utils.py, `_compile_jinja_template`,
// huggingface/transformers@5e43e2e8): trim_blocks and lstrip_blocks (the library's
// Template always lexes that way), `tojson` overridden to json.dumps(ensure_ascii=False,
// indent, separators, sort_keys), `raise_exception` and `strftime_now` as globals; and
// Python's string semantics where the library uses JavaScript's: the `trim` filter and the
// strip/lstrip/rstrip/split methods (python-text.ts). The library's filters and methods
// cannot be replaced, so the parsed template is rewritten once: `x | tojson(…)` becomes
// `__py_tojson(x, …)`, `x | trim` becomes `__py_trim(x)`, and `x.strip(…)` becomes
// `__py_method(x, "strip", …)`, functions the render context provides.
import { Environment, Interpreter, Template } from "@huggingface/jinja";
import {
  ArrayValue,
  BooleanValue,
  FunctionValue,
  IntegerValue,
  NullValue,
  pyJsonDumps,
  raw,
  StringValue,
  toValue,
  type Value,
} from "./jinja-values.ts";
import { pyFloatRepr, pyLstrip, pyRstrip, pySplit, pyStrip } from "./python-text.ts";

type Node = { type: string; [key: string]: unknown };

const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null && typeof (v as Node).type === "string";
const identifier = (value: string): Node => ({ type: "Identifier", value });
const call = (name: string, args: unknown[]): Node => ({ type: "CallExpression", callee: identifier(name), args });

const STRING_METHODS = new Set(["strip", "lstrip", "rstrip", "split"]);

/** The replacement of a node, or undefined to keep it (its children are rewritten either way). */
function replacement(node: Node): Node | undefined {
  if (node.type === "FilterExpression") {
    const filter = node.filter as Node;
    const name = filter.type === "Identifier" ? filter.value : ((filter.callee as Node | undefined)?.value as unknown);
    const args = filter.type === "CallExpression" ? (filter.args as unknown[]) : [];
    if (name === "tojson") return call("__py_tojson", [node.operand, ...args]);
    if (name === "trim") return call("__py_trim", [node.operand, ...args]);
  }
  if (node.type === "CallExpression") {
    const callee = node.callee as Node;
    const property = callee.property as Node | undefined;
    if (
      callee.type === "MemberExpression" &&
      !callee.computed &&
      property?.type === "Identifier" &&
      STRING_METHODS.has(property.value as string)
    )
      return call("__py_method", [
        callee.object,
        { type: "StringLiteral", value: property.value },
        ...(node.args as []),
      ]);
  }
  return undefined;
}

function rewrite(value: unknown): unknown {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = rewrite(value[i]);
    return value;
  }
  if (value instanceof Map) {
    for (const [k, v] of [...value]) {
      value.delete(k);
      value.set(rewrite(k), rewrite(v));
    }
    return value;
  }
  if (!isNode(value)) return value;
  const out = replacement(value) ?? value;
  for (const key of Object.keys(out)) if (key !== "type") out[key] = rewrite(out[key]);
  return out;
}

/** A template compiled for Python-faithful rendering. */
export function compileTemplate(source: string): Template {
  const template = new Template(source);
  rewrite(template.parsed);
  return template;
}

const KWARGS = "KeywordArgumentsValue";

/** Positional values and keyword values of a call. */
function split(args: Value[]): [Value[], Map<string, Value>] {
  const last = args[args.length - 1];
  if (last?.type === KWARGS) return [args.slice(0, -1), last.value as Map<string, Value>];
  return [args, new Map()];
}

const text = (v: Value | undefined): string | null =>
  v === undefined || v.type === "NullValue" || v.type === "UndefinedValue"
    ? null
    : v.type === "StringValue"
      ? (v.value as string)
      : fail(`expected a string, got ${v.type}`);

function fail(message: string): never {
  throw new TypeError(message);
}

/** Python's str() of a value the `trim` filter gets (jinja2 calls soft_str first). */
function pyStr(v: Value): string {
  if (v.type === "StringValue") return v.value as string;
  if (v.type === "BooleanValue") return v.value ? "True" : "False";
  if (v.type === "NullValue") return "None";
  if (v.type === "UndefinedValue") return "";
  if (v.type === "FloatValue") return pyFloatRepr(v.value as number);
  if (v.type === "IntegerValue") return v.toString();
  return fail(`cannot trim a ${v.type}`);
}

const tojson = raw((args) => {
  const [[value, ...rest], kw] = split(args);
  if (value === undefined) fail("tojson() needs a value");
  const option = (name: string, at: number) => kw.get(name) ?? rest[at];
  const indentArg = option("indent", 1);
  const indent =
    indentArg === undefined || indentArg.type === "NullValue"
      ? null
      : indentArg.type === "StringValue"
        ? (indentArg.value as string)
        : " ".repeat(Math.max(0, Number(indentArg.value)));
  const ensureAscii = option("ensure_ascii", 0);
  const separators = option("separators", 2);
  const sortKeys = option("sort_keys", 3);
  const [itemSeparator, keySeparator] =
    separators && separators.type !== "NullValue"
      ? (separators.value as Value[]).map((s) => s.value as string)
      : [indent === null ? ", " : ",", ": "];
  return new StringValue(
    pyJsonDumps(value, {
      indent,
      ensureAscii: !!ensureAscii?.value,
      itemSeparator: itemSeparator!,
      keySeparator: keySeparator!,
      sortKeys: !!sortKeys?.value,
    }),
  );
});

const trim = raw((args) => {
  const [[value, chars]] = split(args);
  return new StringValue(pyStrip(pyStr(value!), text(chars)));
});

const method = raw((args, scope) => {
  const [[target, nameValue, ...rest], kw] = split(args);
  const name = nameValue!.value as string;
  if (target?.type !== "StringValue") {
    const builtin = target?.builtins.get(name);
    if (builtin?.type !== "FunctionValue") fail(`${target?.type} has no method ${name}`);
    return (builtin.value as (a: Value[], s: Environment) => Value)(args.slice(2), scope);
  }
  const s = target.value as string;
  if (name === "split") {
    const sep = text(kw.get("sep") ?? rest[0]);
    const max = kw.get("maxsplit") ?? rest[1];
    return new ArrayValue(pySplit(s, sep, max ? Number(max.value) : -1).map((p) => new StringValue(p)));
  }
  const chars = text(kw.get("chars") ?? rest[0]);
  return new StringValue(
    name === "strip" ? pyStrip(s, chars) : name === "lstrip" ? pyLstrip(s, chars) : pyRstrip(s, chars),
  );
});

/** Python's range(stop) / range(start, stop[, step]). */
const range = raw((args) => {
  const n = split(args)[0].map((v) => Number(v.value));
  const [start, stop, step] = n.length === 1 ? [0, n[0]!, 1] : [n[0]!, n[1]!, n[2] ?? 1];
  if (step === 0) fail("range() arg 3 must not be zero");
  const out: Value[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(new IntegerValue(i));
  return new ArrayValue(out);
});

const raiseException = raw((args) => {
  throw new Error(String(args[0]?.value ?? ""));
});

const MONTHS = ["January", "February", "March", "April", "May", "June", "July"].concat([
  "August",
  "September",
  "October",
  "November",
  "December",
]);
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const pad = (n: number) => String(n).padStart(2, "0");

/** datetime.now().strftime(format) in the C locale, for the codes chat templates use. */
export function strftime(date: Date, format: string): string {
  return format.replace(/%[a-zA-Z%]/g, (code) => {
    switch (code) {
      case "%Y":
        return String(date.getFullYear());
      case "%y":
        return pad(date.getFullYear() % 100);
      case "%m":
        return pad(date.getMonth() + 1);
      case "%d":
        return pad(date.getDate());
      case "%b":
        return MONTHS[date.getMonth()]!.slice(0, 3);
      case "%B":
        return MONTHS[date.getMonth()]!;
      case "%a":
        return DAYS[date.getDay()]!.slice(0, 3);
      case "%A":
        return DAYS[date.getDay()]!;
      case "%H":
        return pad(date.getHours());
      case "%M":
        return pad(date.getMinutes());
      case "%S":
        return pad(date.getSeconds());
      case "%%":
        return "%";
      default:
        return code;
    }
  });
}

const strftimeNow = raw((args) => new StringValue(strftime(new Date(), String(args[0]?.value ?? ""))));

const GLOBALS: ReadonlyArray<[string, () => Value]> = [
  ["true", () => new BooleanValue(true)],
  ["false", () => new BooleanValue(false)],
  ["none", () => new NullValue()],
  ["True", () => new BooleanValue(true)],
  ["False", () => new BooleanValue(false)],
  ["None", () => new NullValue()],
  ["range", () => new FunctionValue(range)],
  ["raise_exception", () => new FunctionValue(raiseException)],
  ["strftime_now", () => new FunctionValue(strftimeNow)],
  ["__py_tojson", () => new FunctionValue(tojson)],
  ["__py_trim", () => new FunctionValue(trim)],
  ["__py_method", () => new FunctionValue(method)],
];

/** Renders a compiled template with `context` (plain values; numbers and key order as lossless-json.ts read them). */
export function renderTemplate(template: Template, context: Record<string, unknown>): string {
  const env = new Environment();
  for (const [name, make] of GLOBALS) env.variables.set(name, make() as never);
  for (const [name, value] of Object.entries(context)) env.variables.set(name, toValue(value) as never);
  const result = new Interpreter(env).run(template.parsed) as unknown as Value;
  return result.value as string;
}
