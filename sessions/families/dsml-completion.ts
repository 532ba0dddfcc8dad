// Splits a DeepSeek V3.2/V4 completion's text (decoded with special tokens kept) into
// reasoning, DSML tool calls and content, as SGLang's `deepseek-v3`/`deepseekv32` and
// `deepseek-v4`/`deepseekv4` parsers do (docs/models.md):
//   [reasoning</think>]content\n\n<｜DSML｜{block}>\n<｜DSML｜invoke name="N">\n
//   <｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>\n…</｜DSML｜invoke>\n</｜DSML｜{block}>
// In thinking mode the prompt ended with `<think>`, so the text starts inside the
// reasoning; it ends at `</think>`, or at a tool-call block that comes first, or runs to
// the end (a length cut). Values with string="true" are the raw text (kept verbatim, as
// the encoder writes them back; SGLang trims them), others JSON. V3.2 is lenient: tags
// without the DSML marker, a bare JSON object as an invoke's body, a missing string
// attribute, a value that is not JSON (kept as text), a repeated parameter (the last
// wins). V4 is strict: a repeated parameter, a value that is not JSON, a missing string
// attribute or a call to a tool the request did not declare make the block malformed.
// House rules: a malformed block stays in the content and is counted, one left open at
// the end (a length cut) stays uncounted, the EOS text at the end is dropped, text after a
// block stays in the content.
import type { ParseContext, ParsedCompletion, StreamSyntax, ToolCall, ToolCallIdSource } from "./family.ts";
import { DSML, EOS, THINK_CLOSE, THINK_OPEN, parseThinkingMode, withoutSuffix } from "./deepseek-encoding.ts";
import { withoutStopTexts } from "./tagged-completion.ts";
import { newToolCallId } from "./tool-call-id.ts";
import { isObject } from "./tool-args.ts";
import { escapeRegExp } from "../escape-regexp.ts";

export interface DsmlDialect {
  /** The block's tag name: "function_calls" (V3.2) or "tool_calls" (V4). */
  block: string;
  /** V4's rules (see the header); V3.2's are lenient. */
  strict: boolean;
  /** V3.2 trims the content around the calls; V4 only drops the "\n\n" before a block. */
  trimContent: boolean;
}

interface Span {
  start: number;
  end: number;
}

/** The tag texts of one dialect, as regexes (`y`: sticky, matched at a position). */
class Tags {
  readonly open: RegExp;
  readonly close: RegExp;
  readonly invoke: RegExp;
  readonly invokeClose: RegExp;
  readonly param: RegExp;
  readonly paramClose: RegExp;

  constructor(dialect: DsmlDialect) {
    const d = dialect.strict ? escapeRegExp(DSML) : `(?:${escapeRegExp(DSML)})?`;
    const block = escapeRegExp(dialect.block);
    this.open = new RegExp(`<${d}${block}>`, "g");
    this.close = new RegExp(`</${d}${block}>`, "g");
    this.invoke = dialect.strict
      ? new RegExp(`<${d}invoke name="([^"]*)">`, "y")
      : new RegExp(`<${d}invoke\\s+name="([^"]*)"\\s*>`, "y");
    this.invokeClose = new RegExp(`</${d}invoke>`, "g");
    this.param = dialect.strict
      ? new RegExp(`<${d}parameter name="([^"]*)" string="(true|false)">`, "y")
      : new RegExp(`<${d}parameter\\s+name="([^"]*)"(?:\\s+string="([^"]*)")?\\s*>`, "y");
    this.paramClose = new RegExp(`</${d}parameter>`, "g");
  }
}

const tagsCache = new Map<string, Tags>();
function tagsOf(dialect: DsmlDialect): Tags {
  const key = `${dialect.block}/${dialect.strict}`;
  let tags = tagsCache.get(key);
  if (!tags) tagsCache.set(key, (tags = new Tags(dialect)));
  return tags;
}

/** The first match of a global regex at or after `from`. */
function find(re: RegExp, text: string, from: number): (Span & { groups: string[] }) | undefined {
  re.lastIndex = from;
  const m = re.exec(text);
  return m ? { start: m.index, end: m.index + m[0].length, groups: m.slice(1) } : undefined;
}

/** A match of a sticky regex exactly at `at`. */
function matchAt(re: RegExp, text: string, at: number): (Span & { groups: (string | undefined)[] }) | undefined {
  re.lastIndex = at;
  const m = re.exec(text);
  return m ? { start: at, end: at + m[0].length, groups: m.slice(1) } : undefined;
}

const skipSpace = (text: string, at: number) => {
  while (at < text.length && /\s/.test(text[at]!)) at++;
  return at;
};

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** One parameter's value, or undefined when the dialect calls it malformed. */
function decodeValue(raw: string, string: string | undefined, strict: boolean): { value: unknown } | undefined {
  if (string === "true") return { value: raw };
  const json = parseJson(raw);
  if (json.ok) return { value: json.value };
  return strict ? undefined : { value: raw };
}

/** The arguments inside one invoke, or undefined when malformed. */
function parseArguments(body: string, tags: Tags, strict: boolean): Record<string, unknown> | undefined {
  if (!strict && body.trim().startsWith("{")) {
    const json = parseJson(body.trim());
    return json.ok && isObject(json.value) ? json.value : undefined;
  }
  const args = new Map<string, unknown>();
  for (let at = skipSpace(body, 0); at < body.length; at = skipSpace(body, at)) {
    const open = matchAt(tags.param, body, at);
    if (!open) return undefined;
    const close = find(tags.paramClose, body, open.end);
    if (!close) return undefined;
    const [name, string] = open.groups;
    if (strict && args.has(name!)) return undefined;
    const value = decodeValue(body.slice(open.end, close.start), string, strict);
    if (!value) return undefined;
    args.set(name!, value.value);
    at = close.end;
  }
  // fromEntries defines own properties: a parameter named "__proto__" stays a parameter.
  return Object.fromEntries(args);
}

/** The declared tool names, or undefined when the request carried no tool list. */
function declaredNames(tools: readonly unknown[] | undefined): Set<string> | undefined {
  if (!Array.isArray(tools)) return undefined;
  const names = new Set<string>();
  for (const tool of tools) {
    const fn = isObject(tool) && isObject(tool.function) ? tool.function : tool;
    if (isObject(fn) && typeof fn.name === "string") names.add(fn.name);
  }
  return names;
}

/** The calls of one block's body, or undefined when the block is malformed. */
function parseBlock(
  body: string,
  dialect: DsmlDialect,
  declared: Set<string> | undefined,
  newId: ToolCallIdSource,
): ToolCall[] | undefined {
  const tags = tagsOf(dialect);
  const calls: ToolCall[] = [];
  for (let at = skipSpace(body, 0); at < body.length; at = skipSpace(body, at)) {
    const open = matchAt(tags.invoke, body, at);
    if (!open) return undefined;
    const close = find(tags.invokeClose, body, open.end);
    if (!close) return undefined;
    const name = open.groups[0]!;
    if (!name || (dialect.strict && declared && !declared.has(name))) return undefined;
    const args = parseArguments(body.slice(open.end, close.start), tags, dialect.strict);
    if (!args) return undefined;
    calls.push({ id: newId(), type: "function", function: { name, arguments: JSON.stringify(args) } });
    at = close.end;
  }
  return calls.length > 0 ? calls : undefined;
}

/** Reasoning up to `</think>` (or up to a tool-call block that comes first), and the rest. */
function splitReasoning(text: string, dialect: DsmlDialect): { reasoning: string; rest: string } {
  const inner = text.startsWith(THINK_OPEN) ? text.slice(THINK_OPEN.length) : text;
  const close = inner.indexOf(THINK_CLOSE);
  const block = find(tagsOf(dialect).open, inner, 0);
  if (close !== -1 && (!block || close < block.start))
    return { reasoning: inner.slice(0, close), rest: inner.slice(close + THINK_CLOSE.length) };
  if (block) return { reasoning: withoutSuffix(inner.slice(0, block.start), "\n\n"), rest: inner.slice(block.start) };
  return { reasoning: inner, rest: "" };
}

/** The markers parseDsmlCompletion reacts to in a dialect (a streamed reply is parsed with them). */
export function dsmlStreamSyntax(dialect: DsmlDialect): StreamSyntax {
  const tag = (close: boolean) => [
    `<${close ? "/" : ""}${DSML}${dialect.block}>`,
    ...(dialect.strict ? [] : [`<${close ? "/" : ""}${dialect.block}>`]),
  ];
  return { blocks: [{ open: tag(false), close: tag(true) }], markers: [THINK_OPEN, THINK_CLOSE, EOS] };
}

export function parseDsmlCompletion(text: string, dialect: DsmlDialect, context?: ParseContext): ParsedCompletion {
  const newId = context?.newId ?? newToolCallId;
  const declared = declaredNames(context?.tools);
  const thinking = parseThinkingMode(context?.kwargs) === "thinking";
  const cut = withoutStopTexts(text, [EOS]);
  const { reasoning, rest } = thinking ? splitReasoning(cut, dialect) : { reasoning: "", rest: cut };
  const tags = tagsOf(dialect);
  let content = "";
  const calls: ToolCall[] = [];
  let malformed = 0;
  let sawBlock = false;
  let at = 0;
  for (;;) {
    const open = find(tags.open, rest, at);
    if (!open) break;
    sawBlock = true;
    const close = find(tags.close, rest, open.end);
    // Open at the end: the length limit cut the block short. It stays, uncounted.
    if (!close) break;
    const reopen = find(tags.open, rest, open.end);
    if (reopen && reopen.start < close.start) {
      // Opened again before it closed: this opener is malformed, the next one starts over.
      content += rest.slice(at, reopen.start);
      malformed++;
      at = reopen.start;
      continue;
    }
    const parsed = parseBlock(rest.slice(open.end, close.start), dialect, declared, newId);
    if (parsed) {
      content += withoutSuffix(rest.slice(at, open.start), "\n\n");
      calls.push(...parsed);
    } else {
      content += rest.slice(at, close.end);
      malformed++;
    }
    at = close.end;
  }
  content += rest.slice(at);
  const parsed: ParsedCompletion = {
    content: dialect.trimContent && sawBlock ? content.trim() : content,
    malformedToolCalls: malformed,
  };
  if (reasoning) parsed.reasoning_content = reasoning;
  if (calls.length > 0) parsed.tool_calls = calls;
  return parsed;
}
