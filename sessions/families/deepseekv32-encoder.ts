// The DeepSeek-V3.2 prompt encoder (docs/models.md), in code: V3.2 ships a Python
// encoder, not a jinja template. BOS, the system text raw (the request's tools appended
// as a "## Tools" section), `<｜User｜>{c}<｜Assistant｜>` + `<think>` or `</think>`, the
// assistant's `{reasoning}</think>{content}` + a DSML `function_calls` block + EOS, and
// tool results with no role token at all: `<function_results>` holding one `<result>` per
// call of the assistant before them, closed after the last one and followed by the next
// opener. With `drop_thinking` false (the family's pin) every assistant keeps its
// reasoning and every opener is `<think>` in thinking mode, so appending never rewrites
// what was rendered; true reproduces DeepSeek's own history dropping.
import type { ChatMessage, ChatRenderer, RenderOptions } from "../chat-template.ts";
import { templateJson } from "./tool-args.ts";
import {
  ASSISTANT,
  BOS,
  DSML,
  EOS,
  THINK_CLOSE,
  THINK_OPEN,
  THINKING_KWARGS,
  USER,
  checkKwargs,
  dropThinking,
  dsmlBlock,
  reasoningOf,
  roleOf,
  textOf,
  thinkingMode,
  toolCallsOf,
  toolFunctions,
  withoutSuffix,
  type Kwargs,
  type ThinkingMode,
} from "./deepseek-encoding.ts";

export const V32_TOOL_BLOCK = "function_calls";
const KNOWN_KWARGS = [...THINKING_KWARGS, "drop_thinking"];
const ROLES = ["system", "developer", "user", "assistant", "tool"];

/** The "## Tools" section V3.2 was trained with, around the tools' JSON schemas (one a line). */
function toolsSection(schemas: readonly unknown[]): string {
  return `## Tools
You have access to a set of tools you can use to answer the user's question.
You can invoke functions by writing a "<${DSML}function_calls>" block like the following as part of your reply to the user:
<${DSML}function_calls>
<${DSML}invoke name="$FUNCTION_NAME">
<${DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</${DSML}parameter>
...
</${DSML}invoke>
<${DSML}invoke name="$FUNCTION_NAME2">
...
</${DSML}invoke>
</${DSML}function_calls>
String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).
If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:
<${DSML}function_calls>
...
</${DSML}function_calls>
<function_results>
...
</function_results>
${THINK_OPEN}...thinking about results${THINK_CLOSE}
Here are the functions available in JSONSchema format:
<functions>
${schemas.map(templateJson).join("\n")}
</functions>
`;
}

interface Options {
  mode: ThinkingMode;
  drop: boolean;
}

function options(kwargs: Kwargs): Options {
  checkKwargs(kwargs, KNOWN_KWARGS, "DeepSeek-V3.2");
  return { mode: thinkingMode(kwargs), drop: dropThinking(kwargs) };
}

type Msg = Readonly<Record<string, unknown>>;

/**
 * The messages as rendered: the request's tools go into the first message when it is a
 * system message, else into a new empty system message put first. Copies only the list.
 */
function withTools(messages: readonly ChatMessage[], tools: unknown[]): { list: Msg[]; tools: unknown[]; at: number } {
  const list: Msg[] = [...messages];
  if (tools.length === 0) return { list, tools, at: -1 };
  if (list[0]?.role !== "system") list.unshift({ role: "system", content: "" });
  return { list, tools, at: 0 };
}

function lastUserIndex(list: readonly Msg[]): number {
  for (let i = list.length - 1; i >= 0; i--) if (list[i]!.role === "user" || list[i]!.role === "developer") return i;
  return -1;
}

/** Where the assistant a tool message answers is, and which of its results this one is (1-based). */
function toolPosition(list: readonly Msg[], index: number): { calls: number; order: number } {
  let at = index - 1;
  while (at >= 0 && list[at]!.role === "tool") at--;
  const assistant = at >= 0 ? list[at]! : undefined;
  if (!assistant || assistant.role !== "assistant")
    throw new Error(`message ${index}: a tool result must follow an assistant's tool calls`);
  const calls = Array.isArray(assistant.tool_calls) ? assistant.tool_calls.length : 0;
  const order = index - at;
  if (order > calls)
    throw new Error(
      `message ${index}: tool result ${order} answers an assistant that made ${calls} tool call${calls === 1 ? "" : "s"}`,
    );
  return { calls, order };
}

/** What one message renders as; `opener` is the thinking tag a generation after it starts with. */
interface Pass {
  opts: Options;
  tools: unknown[];
  /** The index of the message the tools section goes into (-1: no tools). */
  toolsAt: number;
  lastUser: number;
}

function renderMessage(list: readonly Msg[], index: number, pass: Pass): string {
  const msg = list[index]!;
  const role = roleOf(msg, index, ROLES);
  const { opts, tools, toolsAt, lastUser } = pass;
  const thinking = opts.mode === "thinking";
  const opener = (afterLastUser: boolean) => (thinking && (!opts.drop || afterLastUser) ? THINK_OPEN : THINK_CLOSE);
  switch (role) {
    case "system": {
      let text = textOf(msg.content, `message ${index}`);
      if (index === toolsAt) text += "\n\n" + toolsSection(tools);
      return text;
    }
    case "developer": {
      const content = textOf(msg.content, `message ${index}`);
      if (!content) throw new Error(`message ${index}: a developer message needs content`);
      return `${USER}\n\n# The user's message is: ${content}${ASSISTANT}${opener(index === lastUser)}`;
    }
    case "user":
      return `${USER}${textOf(msg.content, `message ${index}`)}${ASSISTANT}${opener(index === lastUser)}`;
    case "tool": {
      const { calls, order } = toolPosition(list, index);
      let text = order === 1 ? "\n\n<function_results>" : "";
      text += `\n<result>${textOf(msg.content, `message ${index}`)}</result>`;
      if (order === calls) text += `\n</function_results>\n\n${opener(index >= lastUser)}`;
      return text;
    }
    default: {
      const calls = toolCallsOf(msg, false);
      const reasoning = reasoningOf(msg);
      let thinkingPart = "";
      if (thinking && (!opts.drop || index > lastUser)) {
        if (opts.drop && index > lastUser && !reasoning && calls.length === 0)
          throw new Error(
            `message ${index}: in thinking mode an assistant after the last user needs reasoning or tool calls`,
          );
        thinkingPart = reasoning + THINK_CLOSE;
      }
      return `${thinkingPart}${textOf(msg.content, `message ${index}`)}${dsmlBlock(V32_TOOL_BLOCK, calls)}${EOS}`;
    }
  }
}

/** The generation prompt the render of `list` ends with, which add_generation_prompt=false leaves out. */
function trailingOpener(list: readonly Msg[], opts: Options): string {
  const last = list.length - 1;
  if (last < 0) return "";
  const role = list[last]!.role;
  const opener = opts.mode === "thinking" ? THINK_OPEN : THINK_CLOSE;
  if (role === "user" || role === "developer") return ASSISTANT + opener;
  if (role === "tool") {
    const { calls, order } = toolPosition(list, last);
    // Only the last expected result closes the block and opens the next turn.
    if (order === calls) return "\n\n" + opener;
  }
  return "";
}

/** Renders `messages` the way DeepSeek-V3.2's encoder does. Throws on what it cannot render. */
export function encodeDeepseekV32(messages: readonly ChatMessage[], options_: RenderOptions): string {
  const opts = options(options_.kwargs ?? {});
  const { list, tools, at } = withTools(messages, toolFunctions(options_.tools, true));
  const pass: Pass = { opts, tools, toolsAt: at, lastUser: lastUserIndex(list) };
  let text = BOS;
  for (let i = 0; i < list.length; i++) text += renderMessage(list, i, pass);
  return options_.addGenerationPrompt ? text : withoutSuffix(text, trailingOpener(list, opts));
}

/**
 * What encodeDeepseekV32 of all of `messages` with the generation prompt adds to its render
 * of the first `kept` without one, rendering only the appended messages: each message
 * renders from itself, the messages before it and the pass; of the pass, only the last
 * user's index can differ between the two renders, and it changes a message's text only
 * with thinking and drop_thinking both on (then undefined: the full renders decide). The
 * shorter render left out its last message's opener (trailingOpener): it comes first here.
 */
export function appendedDeepseekV32(
  messages: readonly ChatMessage[],
  kept: number,
  options_: RenderOptions,
): string | undefined {
  const opts = options(options_.kwargs ?? {});
  if (!options_.addGenerationPrompt || kept < 1 || kept > messages.length) return undefined;
  if (opts.mode === "thinking" && opts.drop) return undefined;
  const { list, tools, at } = withTools(messages, toolFunctions(options_.tools, true));
  const from = kept + (list.length - messages.length);
  const pass: Pass = { opts, tools, toolsAt: at, lastUser: lastUserIndex(list) };
  const opener = trailingOpener(list.slice(0, from), opts);
  if (!renderMessage(list, from - 1, pass).endsWith(opener)) return undefined;
  let text = opener;
  for (let i = from; i < list.length; i++) text += renderMessage(list, i, pass);
  return text;
}

export const deepseekV32Renderer: ChatRenderer = { render: encodeDeepseekV32, renderAppended: appendedDeepseekV32 };
