// What stands inside one tool-call block, per argument syntax: each reader takes a block's
// body (the text between its tags) and gives its calls, or undefined when the block is
// malformed (it then stays in the content, tagged-completion.ts). Values written as XML-ish
// text are typed by the request's tool schemas (tool-args.ts), as SGLang's detectors type them:
// - "json" (Qwen3, SGLang `qwen25`): `{"name": string, "arguments": object}`, whitespace around it allowed;
// - "glm" (GLM-4.7, SGLang `glm47`): `NAME<arg_key>K</arg_key><arg_value>V</arg_value>…`, a
//   declared tool only (when tools were declared), the key trimmed, the value verbatim;
// - "qwen3-coder" (Qwen3.5, Nemotron 3, SGLang `qwen3_coder`): one or more
//   `<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>`; a function or
//   parameter left unclosed ends at the next tag or the body's end; one leading and one
//   trailing newline are stripped from each value; a call to an undeclared tool is kept; a
//   body with no named function is malformed;
// - "minimax" (MiniMax M2, SGLang `minimax-m2`): one or more
//   `<invoke name="N"><parameter name="K">V</parameter>…</invoke>`, nothing else but
//   whitespace, each of a declared tool; values stripped of surrounding newlines.
import type { AssistantTurn, ToolCall } from "./family.ts";
import {
  argumentsObject,
  argumentText,
  glmArgumentValue,
  isDeclaredTool,
  isObject,
  minimaxArgumentValue,
  parameterTypes,
  qwen3CoderArgumentValue,
} from "./tool-args.ts";

type Tools = readonly unknown[] | undefined;
type Call = ToolCall["function"];

export type ArgumentSyntax = "json" | "glm" | "qwen3-coder" | "minimax";

function jsonCall(body: string): Call[] | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (!isObject(value) || typeof value.name !== "string" || value.name === "" || !isObject(value.arguments))
    return undefined;
  return [{ name: value.name, arguments: JSON.stringify(value.arguments) }];
}

const GLM_KEY_OPEN = "<arg_key>";
/** One argument: key, whitespace allowed before the value, value (both taken verbatim; the key is trimmed). */
const GLM_ARGUMENT = /^\s*<arg_key>([\s\S]*?)<\/arg_key>\s*<arg_value>([\s\S]*?)<\/arg_value>/;

function glmCall(body: string, tools: Tools): Call[] | undefined {
  const firstKey = body.indexOf(GLM_KEY_OPEN);
  const name = (firstKey === -1 ? body : body.slice(0, firstKey)).trim();
  if (name === "" || /[<>]/.test(name) || !isDeclaredTool(tools, name)) return undefined;
  const args: Record<string, unknown> = {};
  let rest = firstKey === -1 ? "" : body.slice(firstKey);
  for (let m = GLM_ARGUMENT.exec(rest); m; m = GLM_ARGUMENT.exec(rest)) {
    const key = m[1]!.trim();
    if (key === "") return undefined;
    args[key] = glmArgumentValue(m[2]!, parameterTypes(tools, name, key));
    rest = rest.slice(m[0].length);
  }
  if (rest.trim() !== "") return undefined;
  return [{ name, arguments: JSON.stringify(args) }];
}

const FUNCTION_OPEN = "<function=";
const FUNCTION_CLOSE = "</function>";
const PARAM_OPEN = "<parameter=";
const PARAM_CLOSE = "</parameter>";

/** Where the first of `tags` occurs in `text` from `from`, else the end of the text. */
function firstOf(text: string, from: number, tags: readonly string[]): number {
  let best = text.length;
  for (const tag of tags) {
    const i = text.indexOf(tag, from);
    if (i !== -1 && i < best) best = i;
  }
  return best;
}

function coderCalls(body: string, tools: Tools): Call[] | undefined {
  const calls: Call[] = [];
  let at = body.indexOf(FUNCTION_OPEN);
  while (at !== -1) {
    const start = at + FUNCTION_OPEN.length;
    const close = body.indexOf(FUNCTION_CLOSE, start);
    const fn = body.slice(start, close === -1 ? body.length : close);
    const nameEnd = fn.indexOf(">");
    const name = nameEnd === -1 ? "" : fn.slice(0, nameEnd);
    // A function with no name (or no ">") makes no call; SGLang skips it too.
    if (name !== "")
      calls.push({ name, arguments: JSON.stringify(coderArguments(fn.slice(nameEnd + 1), name, tools)) });
    if (close === -1) break;
    at = body.indexOf(FUNCTION_OPEN, close + FUNCTION_CLOSE.length);
  }
  return calls.length > 0 ? calls : undefined;
}

/** `<parameter=KEY>VALUE` runs: a value ends at `</parameter>`, the next `<parameter=`, or the end. */
function coderArguments(params: string, name: string, tools: Tools): Record<string, unknown> {
  // No prototype: a parameter named "__proto__" is an ordinary key.
  const args = Object.create(null) as Record<string, unknown>;
  let at = params.indexOf(PARAM_OPEN);
  while (at !== -1) {
    const start = at + PARAM_OPEN.length;
    const end = firstOf(params, start, [PARAM_CLOSE, PARAM_OPEN]);
    const match = params.slice(start, end);
    const keyEnd = match.indexOf(">");
    if (keyEnd !== -1) {
      const key = match.slice(0, keyEnd);
      let value = match.slice(keyEnd + 1);
      if (value.startsWith("\n")) value = value.slice(1);
      if (value.endsWith("\n")) value = value.slice(0, -1);
      args[key] = qwen3CoderArgumentValue(value, parameterTypes(tools, name, key));
    }
    at = params.indexOf(PARAM_OPEN, params.startsWith(PARAM_CLOSE, end) ? end + PARAM_CLOSE.length : end);
  }
  return args;
}

/** One call as the templates write it: `<tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n…</function>\n</tool_call>`. */
export function formatCoderCall(call: NonNullable<AssistantTurn["tool_calls"]>[number]): string {
  let text = `<tool_call>\n${FUNCTION_OPEN}${call.function.name}>\n`;
  for (const [key, value] of Object.entries(argumentsObject(call.function.arguments)))
    text += `${PARAM_OPEN}${key}>\n${argumentText(value)}\n${PARAM_CLOSE}\n`;
  return `${text}${FUNCTION_CLOSE}\n</tool_call>`;
}

const INVOKE = /^\s*<invoke name="([^"<>]*)">([\s\S]*?)<\/invoke>/;
const PARAMETER = /^\s*<parameter name="([^"<>]*)">([\s\S]*?)<\/parameter>/;

function minimaxCalls(body: string, tools: Tools): Call[] | undefined {
  const out: Call[] = [];
  let rest = body;
  for (let m = INVOKE.exec(rest); m; m = INVOKE.exec(rest)) {
    const name = m[1]!.trim();
    if (name === "" || !isDeclaredTool(tools, name)) return undefined;
    const args = invokeArguments(m[2]!, name, tools);
    if (!args) return undefined;
    out.push({ name, arguments: JSON.stringify(args) });
    rest = rest.slice(m[0].length);
  }
  return out.length > 0 && rest.trim() === "" ? out : undefined;
}

function invokeArguments(body: string, name: string, tools: Tools): Record<string, unknown> | undefined {
  const args: Record<string, unknown> = {};
  let rest = body;
  for (let m = PARAMETER.exec(rest); m; m = PARAMETER.exec(rest)) {
    const key = m[1]!.trim();
    if (key === "") return undefined;
    const value = m[2]!.replace(/^\n+/, "").replace(/\n+$/, "");
    args[key] = minimaxArgumentValue(value, parameterTypes(tools, name, key));
    rest = rest.slice(m[0].length);
  }
  return rest.trim() === "" ? args : undefined;
}

/** The reader of each argument syntax. */
export const ARGUMENT_SYNTAX: Readonly<Record<ArgumentSyntax, (body: string, tools: Tools) => Call[] | undefined>> = {
  json: jsonCall,
  glm: glmCall,
  "qwen3-coder": coderCalls,
  minimax: minimaxCalls,
};
