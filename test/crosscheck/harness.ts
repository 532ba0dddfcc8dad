// The cross-check (issue 39, docs/models.md "The cross-check"): conversations driven through
// tito-server's router and one worker handler over a real Unix socket, in the test process
// (test/helpers/tree.ts: the prompt ids are the point, not the processes, and the worker
// shares the folder the test loaded), in front of the simulated engine, each
// turn's prompt ids (as the engine received them) compared, increment by increment, with what
// the engine's own stack makes of the same requests: the conversation rendered by Python's
// jinja2 as transformers sets it up after SGLang's message preparation (engine-stack.ts,
// render.py), the new part tokenized by HF's Rust tokenizers. Turn k's increment is the
// render of request k (with the generation prompt) less the render of what it keeps
// (request k-1's messages and the assistant reply, without it); on tito's side it is turn
// k's prompt less the previous prompt, its completion and the family's boundary fix.
// Families that render with an encoder in code (DeepSeek V3.2/V4) have no Python
// reference here: their increments are rendered by tito's encoder, so only tokenization is
// cross-checked. Any corpus in the corpus.json format runs through `crossCheck` (run.ts).
import { startTree, type InProcessTree } from "../helpers/tree.ts";
import { probeAppendRoles } from "../../sessions/append-probe.ts";
import { NEWLINE_STRIP_NAMES, type ChatMessage } from "../../sessions/chat-template.ts";
import { selectFamily, type TitoFamily, type TitoFamilyName } from "../../sessions/families/index.ts";
import { parseJsonLossless, stringifyLossless } from "../../sessions/lossless-json.ts";
import { promptContext, renderOrThrow } from "../../sessions/prompt-builder.ts";
import type { TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { PythonRenderer, RustTokens } from "./engine-stack.ts";
import { firstDifference, idsDifference } from "./diff.ts";

/** What a conversation needs of a family; it runs only where the family has all of it. */
export type Need = "tool_calls" | "no_tool_calls" | "tool" | "system" | "assistant";

/** One conversation of a corpus (corpus.json): the first request's messages, then what each later turn appends. */
export interface Conversation {
  name: string;
  needs?: Need[];
  tools?: unknown[];
  chat_template_kwargs?: Record<string, unknown>;
  first: unknown[];
  /** Per later turn, the messages appended after the assistant's reply; a tool message's "$call" id is the reply's next call id. */
  then?: unknown[][];
}

export interface CrossCheckTarget {
  label: string;
  folder: TokenizerFolder;
  family?: TitoFamilyName;
}

export interface CrossCheckResult {
  sessions: number;
  turns: number;
  /** Token ids compared (the increments' lengths). */
  tokens: number;
  /** Increments rendered by Python (the rest by tito's encoder: no Python reference). */
  pythonRendered: number;
  /** Added tokens the Rust library numbers differently from the folder's file (mapped back: engine-stack.ts). */
  renumbered: number;
  /** The conversations the family cannot run, by name (a need it lacks). */
  skipped: string[];
  /** Every difference, first differing piece shown; empty when the stacks agree. */
  failures: string[];
}

/** A corpus file's text (numbers and key order kept, as Python reads them), with `{"$repeat": [s, n]}` expanded. */
export function readCorpus(text: string): Conversation[] {
  return expand(parseJsonLossless(text)) as Conversation[];
}

function expand(value: unknown): unknown {
  if (Array.isArray(value)) {
    value.forEach((v, i) => (value[i] = expand(v)));
    return value;
  }
  if (value === null || typeof value !== "object") return value;
  const obj = value as Record<string, unknown>;
  if (Array.isArray(obj.$repeat)) return String(obj.$repeat[0]).repeat(Number(obj.$repeat[1]));
  for (const key of Object.keys(obj)) obj[key] = expand(obj[key]);
  return obj;
}

/** Whether the family parses a tool call back from what it writes for one. */
function callsTools(family: TitoFamily): boolean {
  const call = { id: "functions.probe:0", type: "function" as const, function: { name: "probe", arguments: { a: 1 } } };
  const text = family.formatCompletion({ content: "", tool_calls: [call] });
  return (
    (family.parseCompletion(text, { tools: [{ type: "function", function: { name: "probe" } }] }).tool_calls ?? [])
      .length === 1
  );
}

function missingNeed(c: Conversation, family: TitoFamily, roles: readonly string[]): Need | undefined {
  const tools = callsTools(family);
  return (c.needs ?? []).find((need) =>
    need === "tool_calls" ? !tools : need === "no_tool_calls" ? tools : !roles.includes(need),
  );
}

interface Rig {
  server: InProcessTree;
  prompts: number[][];
}

async function startRig(t: CrossCheckTarget): Promise<Rig> {
  const prompts: number[][] = [];
  const server = await startTree({
    workers: 1,
    tokenizerFolder: t.folder,
    titoFamily: t.family,
    sim: {
      titoFamily: t.family,
      beforeReply: (body) => {
        const ids = (body as { input_ids?: unknown }).input_ids;
        if (Array.isArray(ids)) prompts.push(ids as number[]);
      },
    },
  });
  return { server, prompts };
}

async function post(
  url: string,
  body: string,
): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  const text = await res.text();
  return { status: res.status, text, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const special = (v: unknown) => (typeof v === "string" ? v : (v as { content?: unknown } | undefined)?.content);

/** The variables transformers renders with besides the messages: the special tokens the tokenizer has. */
function tokenContext(folder: TokenizerFolder): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of ["bos_token", "eos_token", "unk_token", "pad_token"]) {
    const value = special(folder.config[key]);
    if (typeof value === "string") out[key] = value;
  }
  return out;
}

/** Resolves "$call" tool_call_ids to the reply's call ids, in order. */
function resolveCalls(step: unknown[], reply: ChatMessage): unknown[] {
  const ids = ((reply.tool_calls as Array<{ id: string }> | undefined) ?? []).map((c) => c.id);
  let next = 0;
  return step.map((m) => {
    const msg = m as Record<string, unknown>;
    if (msg.tool_call_id !== "$call") return m;
    return { ...msg, tool_call_id: ids[next++ % Math.max(ids.length, 1)] ?? "call_none" };
  });
}

interface Turn {
  body: string;
  messages: unknown[];
  promptIds: number[];
  completionIds: number[];
}

/** Runs every conversation the family can run on one server; compares every turn. */
export async function crossCheck(
  target: CrossCheckTarget,
  corpus: readonly Conversation[],
  python?: PythonRenderer,
): Promise<CrossCheckResult> {
  const family = selectFamily(target.folder, target.family);
  const ctx = promptContext(target.folder, family, { ...family.pinnedKwargs });
  const roles = probeAppendRoles(family, ctx.renderer, family.pinnedKwargs).roles;
  const template = ctx.renderer.template === undefined ? undefined : (family.template ?? target.folder.chatTemplate);
  const rust = new RustTokens(
    target.folder.dir,
    (target.folder.tokenizer as unknown as { added_tokens: { id: number; content: string }[] }).added_tokens,
  );
  const own = python ?? new PythonRenderer();
  const result: CrossCheckResult = {
    sessions: 0,
    turns: 0,
    tokens: 0,
    pythonRendered: 0,
    renumbered: rust.renumbered,
    skipped: [],
    failures: [],
  };
  const rig = await startRig(target);
  try {
    for (const c of corpus) {
      if (missingNeed(c, family, roles) !== undefined) {
        result.skipped.push(c.name);
        continue;
      }
      const turns = await drive(rig, c, result, `${target.label} / ${c.name}`);
      if (turns === undefined) continue;
      result.sessions++;
      for (let k = 0; k < turns.length; k++) {
        const where = `${target.label} / ${c.name} / turn ${k}`;
        const failure = await compareTurn(
          turns,
          k,
          { family, folder: target.folder, template, ctx, rust, python: own, c },
          result,
        );
        result.turns++;
        if (failure !== undefined) {
          result.failures.push(`${where}: ${failure}`);
          break;
        }
      }
    }
  } finally {
    await rig.server.shutdown();
    if (!python) own.close();
  }
  return result;
}

/** Drives the conversation through the server; undefined (and a failure recorded) when a turn is refused. */
async function drive(rig: Rig, c: Conversation, result: CrossCheckResult, where: string): Promise<Turn[] | undefined> {
  const created = await post(`${rig.server.url}/sessions`, "{}");
  const id = created.json.session_id as string;
  const extra: Record<string, unknown> = {};
  if (c.tools) extra.tools = c.tools;
  if (c.chat_template_kwargs) extra.chat_template_kwargs = c.chat_template_kwargs;
  const messages: unknown[] = [...c.first];
  const turns: Turn[] = [];
  for (let k = 0; k <= (c.then?.length ?? 0); k++) {
    if (k > 0) messages.push(...resolveCalls(c.then![k - 1]!, turns[k - 1]!.messages.at(-1) as ChatMessage));
    const body = stringifyLossless({ model: "m", ...extra, messages });
    const before = rig.prompts.length;
    const res = await post(`${rig.server.url}/sessions/${id}/v1/chat/completions`, body);
    if (res.status !== 200 || rig.prompts.length !== before + 1) {
      result.failures.push(`${where} / turn ${k}: the server answered ${res.status}: ${res.text.slice(0, 300)}`);
      return undefined;
    }
    const choice = (res.json.choices as Array<Record<string, unknown>>)[0]!;
    const reply = choice.message as ChatMessage;
    const completionIds = (choice.meta_info as { output_token_logprobs: [number, number][] }).output_token_logprobs.map(
      ([, t]) => t,
    );
    turns.push({ body, messages: [...messages, reply], promptIds: rig.prompts[before]!, completionIds });
    messages.push(reply);
  }
  return turns;
}

interface CompareContext {
  family: TitoFamily;
  folder: TokenizerFolder;
  template: string | undefined;
  ctx: ReturnType<typeof promptContext>;
  rust: RustTokens;
  python: PythonRenderer;
  c: Conversation;
}

/** The engine stack's render of `messages` (Python's, or tito's encoder where there is no template). */
async function reference(
  cc: CompareContext,
  messages: unknown[],
  generation: boolean,
): Promise<{ text?: string; error?: string }> {
  const body = stringifyLossless({
    model: "m",
    tools: cc.c.tools,
    chat_template_kwargs: cc.c.chat_template_kwargs,
    messages,
  });
  if (cc.template === undefined) {
    const parsed = parseJsonLossless(body) as { messages: ChatMessage[]; tools?: unknown[] };
    const kwargs = { ...cc.family.pinnedKwargs, ...cc.c.chat_template_kwargs };
    try {
      return {
        text: renderOrThrow(cc.ctx.renderer, parsed.messages, {
          addGenerationPrompt: generation,
          kwargs,
          tools: parsed.tools,
        }),
      };
    } catch (err) {
      return { error: (err as Error).message };
    }
  }
  return cc.python.render({
    template: cc.template,
    body,
    add_generation_prompt: generation,
    context: { ...tokenContext(cc.folder), ...cc.family.pinnedKwargs },
    helpers: [...NEWLINE_STRIP_NAMES],
  });
}

async function compareTurn(
  turns: Turn[],
  k: number,
  cc: CompareContext,
  result: CrossCheckResult,
): Promise<string | undefined> {
  const turn = turns[k]!;
  const request = turn.messages.slice(0, -1);
  const whole = await reference(cc, request, true);
  if (whole.text === undefined) return `the engine's stack refuses the request: ${whole.error}`;
  let increment = whole.text;
  let ours = turn.promptIds;
  if (k > 0) {
    const prev = turns[k - 1]!;
    const kept = await reference(cc, prev.messages, false);
    if (kept.text === undefined) return `the engine's stack refuses the kept conversation: ${kept.error}`;
    if (!whole.text.startsWith(kept.text))
      return `the engine's render of the request does not extend its render of the kept conversation: ${firstDifference(kept.text, whole.text)}`;
    increment = whole.text.slice(kept.text.length);
    const checkpoint = [...prev.promptIds, ...prev.completionIds];
    const drop = cc.family.boundaryDrop?.(checkpoint) ?? 0;
    const joined = [...checkpoint.slice(0, checkpoint.length - drop), ...cc.family.boundaryIds(checkpoint)];
    const head = turn.promptIds.slice(0, joined.length);
    if (head.length !== joined.length || head.some((id, i) => id !== joined[i]))
      return `tito's prompt does not start with the previous prompt, its completion and the boundary fix`;
    ours = turn.promptIds.slice(joined.length);
  }
  if (cc.template !== undefined) result.pythonRendered++;
  const expected = await cc.rust.encode(increment);
  result.tokens += expected.length;
  const diff = idsDifference(expected, ours, (ids) => cc.folder.decode(ids));
  if (diff === undefined) return undefined;
  const tokenizersAgree =
    idsDifference(expected, cc.folder.encode(increment), (ids) => cc.folder.decode(ids)) === undefined;
  return (
    `${tokenizersAgree ? "the render differs" : "the tokenizers differ"} at token ${diff.index} of the increment: ` +
    `engine ${JSON.stringify(diff.expected)}, tito ${JSON.stringify(diff.actual)}; engine text there: ${JSON.stringify(diff.context)}`
  );
}
