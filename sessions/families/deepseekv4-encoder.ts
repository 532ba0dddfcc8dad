// The DeepSeek-V4 prompt encoder (docs/models.md), in code: V4 ships a Python encoder,
// not a jinja template. V4 has no tool role: a run of consecutive tool and user messages
// is folded into one `<｜User｜>` block, tool results as `<tool_result>{c}</tool_result>`
// (sorted by the calling assistant's call order) and user texts, joined by "\n\n". A user
// block is followed by `<｜Assistant｜>` + `<think>`/`</think>` only when an assistant or
// the end comes next. The assistant is `{reasoning}</think>{content}` + a DSML
// `tool_calls` block + EOS; the system text is raw, the request's tools appended as a
// "## Tools … ### Available Tool Schemas" section; `reasoning_effort: "max"` puts a fixed
// paragraph first. Folding is why later turns are rendered as a diff of the real history
// (the family's `increment: "history"`): a run rendered alone would not fold the same way.
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

export const V4_TOOL_BLOCK = "tool_calls";
const KNOWN_KWARGS = [...THINKING_KWARGS, "drop_thinking", "reasoning_effort"];
const ROLES = ["system", "developer", "user", "assistant", "tool"];

/** Put before the first message in thinking mode with `reasoning_effort: "max"`. */
export const REASONING_EFFORT_MAX =
  "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n" +
  "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n" +
  "Explicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

/** The "## Tools" section V4 was trained with, around the tools' JSON schemas (one a line). */
function toolsSection(schemas: readonly unknown[]): string {
  return `## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<${DSML}tool_calls>" block like the following:

<${DSML}tool_calls>
<${DSML}invoke name="$TOOL_NAME">
<${DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</${DSML}parameter>
...
</${DSML}invoke>
<${DSML}invoke name="$TOOL_NAME2">
...
</${DSML}invoke>
</${DSML}tool_calls>

String parameters should be specified as is and set \`string="true"\`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set \`string="false"\`.

If thinking_mode is enabled (triggered by ${THINK_OPEN}), you MUST output your complete reasoning inside ${THINK_OPEN}...${THINK_CLOSE} BEFORE any tool calls or final response.

Otherwise, output directly after ${THINK_CLOSE} with tool calls or final response.

### Available Tool Schemas

${schemas.map(templateJson).join("\n")}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
`;
}

interface Options {
  mode: ThinkingMode;
  drop: boolean;
  maxEffort: boolean;
}

function options(kwargs: Kwargs): Options {
  checkKwargs(kwargs, KNOWN_KWARGS, "DeepSeek-V4");
  const effort = kwargs.reasoning_effort ?? null;
  if (effort !== null && effort !== "max" && effort !== "high")
    throw new Error(`reasoning_effort must be "max", "high" or null, not ${JSON.stringify(effort)}`);
  return { mode: thinkingMode(kwargs), drop: dropThinking(kwargs), maxEffort: effort === "max" };
}

type Msg = Readonly<Record<string, unknown>>;
type Part = { text: string } | { text: string; toolCallId: string };

/** A message after folding: tool and user runs become one user block of parts. */
type Block =
  | { role: "system"; text: string; tools: boolean }
  | { role: "developer"; text: string }
  | { role: "user"; parts: Part[] }
  | { role: "assistant"; msg: Msg };

/** A tool result's text: list content is its text parts joined by "\n\n", other parts marked unsupported. */
function toolResultText(content: unknown, index: number): string {
  if (!Array.isArray(content)) return textOf(content, `message ${index}`);
  return content
    .map((p: { type?: unknown; text?: unknown }) =>
      p?.type === "text" ? (typeof p.text === "string" ? p.text : "") : `[Unsupported ${String(p?.type)}]`,
    )
    .join("\n\n");
}

/** Folds the messages into blocks; the request's tools go into a first system block (made if missing). */
function fold(messages: readonly ChatMessage[], tools: boolean): Block[] {
  const blocks: Block[] = [];
  messages.forEach((msg, i) => {
    const role = roleOf(msg, i, ROLES);
    if (msg.task !== undefined && msg.task !== null) throw new Error(`message ${i}: tasks are not supported`);
    const last = blocks[blocks.length - 1];
    if (role === "tool" || role === "user") {
      const part: Part =
        role === "tool"
          ? {
              text: toolResultText(msg.content, i),
              toolCallId: typeof msg.tool_call_id === "string" ? msg.tool_call_id : "",
            }
          : { text: textOf(msg.content, `message ${i}`) };
      if (last?.role === "user") last.parts.push(part);
      else blocks.push({ role: "user", parts: [part] });
    } else if (role === "system")
      blocks.push({ role: "system", text: textOf(msg.content, `message ${i}`), tools: false });
    else if (role === "developer") {
      const text = textOf(msg.content, `message ${i}`);
      if (!text) throw new Error(`message ${i}: a developer message needs content`);
      blocks.push({ role: "developer", text });
    } else blocks.push({ role: "assistant", msg });
  });
  if (tools) {
    const first = blocks[0];
    if (first?.role === "system") blocks[0] = { ...first, tools: true };
    else blocks.unshift({ role: "system", text: "", tools: true });
  }
  return blocks;
}

/** Orders each block's tool results by the call order of the last assistant that made calls. */
function sortToolResults(blocks: Block[]): void {
  let order = new Map<string, number>();
  blocks.forEach((block, b) => {
    if (block.role === "assistant" && Array.isArray(block.msg.tool_calls) && block.msg.tool_calls.length > 0) {
      order = new Map();
      block.msg.tool_calls.forEach((call: { id?: unknown }, i: number) => {
        if (typeof call?.id === "string" && call.id) order.set(call.id, i);
      });
    } else if (block.role === "user") {
      const results = block.parts.filter((p): p is Part & { toolCallId: string } => "toolCallId" in p);
      if (results.length < 2 || order.size === 0) return;
      const sorted = [...results].sort((a, c) => (order.get(a.toolCallId) ?? 0) - (order.get(c.toolCallId) ?? 0));
      let next = 0;
      blocks[b] = { role: "user", parts: block.parts.map((p) => ("toolCallId" in p ? sorted[next++]! : p)) };
    }
  });
}

/** DeepSeek's history dropping: reasoning of assistants and developer messages before the last user go. */
function dropHistory(blocks: Block[]): Block[] {
  const lastUser = lastUserIndex(blocks);
  const out: Block[] = [];
  blocks.forEach((block, i) => {
    if (i >= lastUser || block.role === "user" || block.role === "system") out.push(block);
    else if (block.role === "assistant") {
      const { reasoning_content: _r, reasoning: _s, ...rest } = block.msg;
      out.push({ role: "assistant", msg: rest });
    }
  });
  return out;
}

function lastUserIndex(blocks: readonly Block[]): number {
  for (let i = blocks.length - 1; i >= 0; i--)
    if (blocks[i]!.role === "user" || blocks[i]!.role === "developer") return i;
  return -1;
}

interface Pass {
  opts: Options;
  schemas: unknown[];
  /** Whether history reasoning is dropped after all (never when tools are in the conversation). */
  drop: boolean;
  lastUser: number;
}

function renderBlock(blocks: readonly Block[], index: number, pass: Pass): string {
  const block = blocks[index]!;
  const { opts, schemas, drop, lastUser } = pass;
  const thinking = opts.mode === "thinking";
  let text = index === 0 && thinking && opts.maxEffort ? REASONING_EFFORT_MAX : "";
  switch (block.role) {
    case "system":
      text += block.text + (block.tools ? "\n\n" + toolsSection(schemas) : "");
      break;
    case "developer":
      text += USER + block.text;
      break;
    case "user":
      text +=
        USER +
        block.parts.map((p) => ("toolCallId" in p ? `<tool_result>${p.text}</tool_result>` : p.text)).join("\n\n");
      break;
    case "assistant": {
      const msg = block.msg;
      const thinkingPart = thinking && (!drop || index > lastUser) ? reasoningOf(msg) + THINK_CLOSE : "";
      const content = textOf(msg.content, `assistant block ${index}`);
      text += thinkingPart + content + dsmlBlock(V4_TOOL_BLOCK, toolCallsOf(msg, true));
      if (msg.wo_eos !== true) text += EOS;
      break;
    }
  }
  // A user block opens the assistant's turn only when an assistant (or nothing) comes next.
  const next = blocks[index + 1];
  if ((block.role === "user" || block.role === "developer") && (next === undefined || next.role === "assistant"))
    text += ASSISTANT + (thinking && (!drop || index >= lastUser) ? THINK_OPEN : THINK_CLOSE);
  return text;
}

/** Renders `messages` the way DeepSeek-V4's encoder does. Throws on what it cannot render. */
export function encodeDeepseekV4(messages: readonly ChatMessage[], options_: RenderOptions): string {
  const opts = options(options_.kwargs ?? {});
  const schemas = toolFunctions(options_.tools, false);
  let blocks = fold(messages, schemas.length > 0);
  sortToolResults(blocks);
  // Tools in the conversation keep every turn's reasoning, whatever drop_thinking says.
  const drop = opts.drop && schemas.length === 0;
  if (opts.mode === "thinking" && drop) blocks = dropHistory(blocks);
  const pass: Pass = { opts, schemas, drop, lastUser: lastUserIndex(blocks) };
  let text = BOS;
  for (let i = 0; i < blocks.length; i++) text += renderBlock(blocks, i, pass);
  const last = blocks[blocks.length - 1];
  if (options_.addGenerationPrompt || (last?.role !== "user" && last?.role !== "developer")) return text;
  // Without a generation prompt the last user block's opener goes.
  return withoutSuffix(withoutSuffix(text, opts.mode === "thinking" ? THINK_OPEN : THINK_CLOSE), ASSISTANT);
}

export const deepseekV4Renderer: ChatRenderer = { render: encodeDeepseekV4 };
