// Tool-call arguments written as XML-ish text (one value per tag, no JSON around them), as
// GLM-4.7, MiniMax M2 and the Qwen3-Coder format (Qwen3.5, Nemotron 3) write them: the
// declared tools and their parameter types (from the request's JSON schemas), the value
// conversions of SGLang's parsers, and the JSON the chat templates' `tojson` writes for
// non-string values (formatCompletion).
import { pyFloatRepr } from "../python-text.ts";

/** The `function` object of the declared tool `name` in `tools` (OpenAI shape, or bare functions). */
function declared(tools: readonly unknown[] | undefined, name: string): Record<string, unknown> | undefined {
  for (const tool of tools ?? []) {
    if (!isObject(tool)) continue;
    const fn = isObject(tool.function) ? tool.function : tool;
    if (fn.name === name) return fn;
  }
  return undefined;
}

export const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Whether a call to `name` counts: always when the request declared no tools (nothing to
 * check against), else only when `name` is one of them (SGLang drops other calls).
 */
export function isDeclaredTool(tools: readonly unknown[] | undefined, name: string): boolean {
  return tools === undefined || tools.length === 0 || declared(tools, name) !== undefined;
}

const JSON_TYPE_OF = (v: unknown): string =>
  v === null
    ? "null"
    : typeof v === "boolean"
      ? "boolean"
      : typeof v === "number"
        ? Number.isInteger(v)
          ? "integer"
          : "number"
        : typeof v === "string"
          ? "string"
          : Array.isArray(v)
            ? "array"
            : "object";

/** Every type a schema allows: `type` (one or a list), the types of `enum`/`const` values, and anyOf/oneOf/allOf branches. */
function schemaTypes(schema: unknown, out: Set<string>, depth = 0): void {
  if (!isObject(schema) || depth > 16) return;
  const type = schema.type;
  if (typeof type === "string") out.add(type);
  else if (Array.isArray(type)) for (const t of type) if (typeof t === "string") out.add(t);
  if (Array.isArray(schema.enum)) for (const v of schema.enum) out.add(JSON_TYPE_OF(v));
  if ("const" in schema) out.add(JSON_TYPE_OF(schema.const));
  for (const key of ["anyOf", "oneOf", "allOf"])
    if (Array.isArray(schema[key])) for (const branch of schema[key] as unknown[]) schemaTypes(branch, out, depth + 1);
}

/**
 * The JSON-schema types the parameter `param` of tool `name` may take, lower-cased; empty
 * when the tool, the parameter or any type for it is not declared.
 */
export function parameterTypes(tools: readonly unknown[] | undefined, name: string, param: string): string[] {
  const fn = declared(tools, name);
  const parameters = fn && isObject(fn.parameters) ? fn.parameters : undefined;
  const properties = parameters && isObject(parameters.properties) ? parameters.properties : undefined;
  if (!properties || !Object.hasOwn(properties, param)) return [];
  const types = new Set<string>();
  schemaTypes(properties[param], types);
  return [...types].map((t) => t.toLowerCase());
}

const INTEGER = /^[-+]?\d+$/;
const FLOAT = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/**
 * A GLM-4.7 argument value (SGLang `glm47`): a parameter declared as a string alone stays
 * the raw text; any other is read as JSON, then as a JSON-escaped JSON text, then (when its
 * type is declared) as a Python literal; what none of them reads stays the raw text. A
 * number or integer parameter written as a quoted number becomes the number.
 */
export function glmArgumentValue(raw: string, types: readonly string[]): unknown {
  const only =
    types.length === 1
      ? types[0]
      : types.length === 2 && types.includes("number") && types.includes("integer")
        ? "number"
        : undefined;
  if (only === "string") return raw;
  let parsed = readJson(raw);
  if (parsed === undefined) {
    const unescaped = readJson(`"${raw}"`);
    if (unescaped && typeof unescaped.value === "string") parsed = readJson(unescaped.value);
  }
  if (parsed === undefined && only !== undefined) parsed = pythonLiteral(raw);
  if (parsed === undefined) return raw;
  const value = parsed.value;
  if (typeof value === "string") {
    const text = value.trim();
    if (only === "integer" && INTEGER.test(text)) return Number(text);
    if (only === "number" && FLOAT.test(text)) return Number(text);
  }
  return value;
}

/** `{value}` of a JSON text; undefined when it is not one. */
function readJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

const TYPE_ORDER = ["integer", "int", "number", "float", "boolean", "bool", "object", "array", "string", "str", "text"];

/**
 * A MiniMax M2 argument value (SGLang `minimax-m2`): `null`/`none`/`nil` is null; else the
 * first declared type (integer, number, boolean, object, array, string, in that order) the
 * text reads as; an undeclared parameter is a string; when no declared type reads it, JSON,
 * else the raw text. Numbers with no fraction become integers.
 */
export function minimaxArgumentValue(raw: string, declaredTypes: readonly string[]): unknown {
  const lower = raw.toLowerCase();
  if (lower === "null" || lower === "none" || lower === "nil") return null;
  const types = declaredTypes.length === 0 ? ["string"] : declaredTypes;
  const text = raw.trim();
  for (const type of TYPE_ORDER) {
    if (!types.includes(type)) continue;
    if (type === "string" || type === "str" || type === "text") return raw;
    if ((type === "integer" || type === "int") && INTEGER.test(text)) return Number(text);
    if ((type === "number" || type === "float") && FLOAT.test(text)) return Number(text);
    if (type === "boolean" || type === "bool") {
      if (["true", "1", "yes", "on"].includes(text.toLowerCase())) return true;
      if (["false", "0", "no", "off"].includes(text.toLowerCase())) return false;
    }
    if (type === "object" || type === "array") {
      const parsed = readJson(raw);
      if (parsed !== undefined) return parsed.value;
    }
  }
  const parsed = readJson(raw);
  return parsed === undefined ? raw : parsed.value;
}

/**
 * A Python literal (what `ast.literal_eval` reads, for the values models write): numbers,
 * quoted strings, True/False/None, lists, tuples and dicts; undefined otherwise.
 */
export function pythonLiteral(text: string): { value: unknown } | undefined {
  const reader = new LiteralReader(text);
  try {
    const value = reader.value();
    reader.space();
    return reader.done() ? { value } : undefined;
  } catch {
    return undefined;
  }
}

const ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0" };

class LiteralReader {
  #at = 0;
  readonly #text: string;
  constructor(text: string) {
    this.#text = text;
  }
  done(): boolean {
    return this.#at === this.#text.length;
  }
  space(): void {
    while (this.#at < this.#text.length && /\s/.test(this.#text[this.#at]!)) this.#at++;
  }
  #fail(): never {
    throw new Error("not a Python literal");
  }
  #eat(c: string): boolean {
    this.space();
    if (this.#text[this.#at] !== c) return false;
    this.#at++;
    return true;
  }
  value(): unknown {
    this.space();
    const c = this.#text[this.#at];
    if (c === "[") return this.#sequence("]");
    if (c === "(") return this.#sequence(")");
    if (c === "{") return this.#dict();
    if (c === "'" || c === '"') return this.#string(c);
    const word = /^(True|False|None|[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)/.exec(this.#text.slice(this.#at));
    if (!word) this.#fail();
    this.#at += word[0].length;
    return word[0] === "True" ? true : word[0] === "False" ? false : word[0] === "None" ? null : Number(word[0]);
  }
  #sequence(close: string): unknown[] {
    this.#at++;
    const out: unknown[] = [];
    while (!this.#eat(close)) {
      out.push(this.value());
      if (!this.#eat(",")) {
        if (!this.#eat(close)) this.#fail();
        break;
      }
    }
    return out;
  }
  #dict(): Record<string, unknown> {
    this.#at++;
    const out: Record<string, unknown> = {};
    while (!this.#eat("}")) {
      const key = this.value();
      if (typeof key !== "string" && typeof key !== "number") this.#fail();
      if (!this.#eat(":")) this.#fail();
      out[String(key)] = this.value();
      if (!this.#eat(",")) {
        if (!this.#eat("}")) this.#fail();
        break;
      }
    }
    return out;
  }
  #string(quote: string): string {
    let out = "";
    for (this.#at++; this.#at < this.#text.length; this.#at++) {
      const c = this.#text[this.#at]!;
      if (c === quote) {
        this.#at++;
        return out;
      }
      if (c === "\\") {
        const next = this.#text[++this.#at];
        if (next === undefined) break;
        out += ESCAPES[next] ?? `\\${next}`;
      } else out += c;
    }
    this.#fail();
  }
}

/**
 * JSON as the chat templates' `tojson` and Python's `json.dumps(…, ensure_ascii=False)`
 * write it: separators ", " and ": ", non-ASCII kept, undefined members left out.
 */
export function templateJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(templateJson).join(", ")}]`;
  if (isObject(value))
    return `{${Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}: ${templateJson(v)}`)
      .join(", ")}}`;
  // A float as Python's json.dumps writes it (1e-07, not 1e-7), as the template's tojson does.
  if (typeof value === "number" && Number.isFinite(value) && !Number.isInteger(value)) return pyFloatRepr(value);
  return JSON.stringify(value) ?? "null";
}

/** A tool call's arguments as an object (`arguments` may be a JSON string); {} when it is neither. */
export function argumentsObject(args: unknown): Record<string, unknown> {
  if (typeof args === "string") {
    const parsed = readJson(args);
    return parsed !== undefined && isObject(parsed.value) ? parsed.value : {};
  }
  return isObject(args) ? args : {};
}

/** An argument value as the templates write it: a string as is, anything else as JSON. */
export const argumentText = (value: unknown): string => (typeof value === "string" ? value : templateJson(value));

const STRING_TYPES = ["string", "str", "text", "varchar", "char", "enum"];
const INTEGER_PREFIXES = ["int", "uint", "long", "short", "unsigned"];

/**
 * A Qwen3-Coder argument value (SGLang `qwen3_coder`, used by Qwen3.5 and Nemotron 3):
 * `null` (any case) is null for every parameter; an undeclared parameter stays the raw
 * text; else by the declared type, `null` aside: a string type keeps the raw text; an
 * integer or number type reads the number; a boolean `true`/`false` (any case); an object
 * or array type reads JSON, then a Python literal; any other type a Python literal. What
 * its type does not read stays the raw text — also for a boolean, where SGLang makes it
 * false: the client sees what the model wrote, and it renders back the same.
 */
export function qwen3CoderArgumentValue(raw: string, declaredTypes: readonly string[]): unknown {
  if (raw.toLowerCase() === "null") return null;
  const types = declaredTypes.filter((t) => t !== "null");
  if (declaredTypes.length === 0 || types.some((t) => STRING_TYPES.includes(t))) return raw;
  const type = types[0] ?? "null";
  const text = raw.trim();
  if (INTEGER_PREFIXES.some((p) => type.startsWith(p))) return INTEGER.test(text) ? Number(text) : raw;
  if (type.startsWith("num") || type.startsWith("float")) return FLOAT.test(text) ? Number(text) : raw;
  if (type === "boolean" || type === "bool" || type === "binary") {
    const lower = text.toLowerCase();
    return lower === "true" ? true : lower === "false" ? false : raw;
  }
  if (["object", "array", "arr"].includes(type) || type.startsWith("dict") || type.startsWith("list")) {
    const parsed = readJson(raw) ?? pythonLiteral(raw);
    return parsed === undefined ? raw : parsed.value;
  }
  const literal = pythonLiteral(raw);
  return literal === undefined ? raw : literal.value;
}
