// Builds the prompt ids of one chat turn (docs/architecture.md, "The token algorithm"): the
// first turn renders the whole conversation; later turns detect a one-step rollback,
// enforce append-only + allowed roles, tokenize only the appended messages segment by
// segment, add the generation prompt, and join it all to the accumulated ids with the
// family's boundary fix. It plans; it never mutates the trajectory (the caller applies
// the rollback it returns) and never re-tokenizes what the model produced. It also checks
// the configured append roles against what the family can append (appendRoles).
import {
  fixedContext,
  jinjaRenderer,
  joinTextParts,
  type ChatMessage,
  type ChatRenderer,
  type RenderOptions,
} from "./chat-template.ts";
import {
  AppendRoleError,
  RollbackError,
  SessionConfigError,
  TemplateRenderError,
  TitoError,
  TokenizationError,
} from "./errors.ts";
import type { CheckpointView } from "./checkpoints.ts";
import { IdBuilder } from "./id-builder.ts";
import { generationPromptInputs, inputsArePlain, mayRefuse } from "./generation-prompt.ts";
import { adoptStored, matchingPrefixLength, type MessageMatcher } from "./message-compare.ts";
import type { TitoFamily } from "./families/index.ts";
import type { TokenizerFolder } from "./tokenizer-folder.ts";

export interface PromptContext {
  folder: TokenizerFolder;
  family: TitoFamily;
  /** The family's renderer (its own template or encoder), else the folder's template. */
  renderer: ChatRenderer;
  kwargs: Readonly<Record<string, unknown>>;
  allowedAppendRoles: readonly string[];
  /** Roles the folder's template does not render append-only, and why (append-probe.ts): an append of one is a 400 saying so. */
  refusedRoles?: ReadonlyMap<string, string>;
  /** How request messages are matched against the stored ones (message-compare.ts); default strict. */
  matcher?: MessageMatcher;
}

/** A context with the family's renderer (its own template or encoder, else the folder's template). */
export function promptContext(
  folder: TokenizerFolder,
  family: TitoFamily,
  kwargs: Record<string, unknown> = {},
  allowedAppendRoles: readonly string[] = family.appendRoles,
): PromptContext {
  const renderer = family.renderer ?? jinjaRenderer(folder, family.template);
  return { folder, family, renderer, kwargs, allowedAppendRoles };
}

/** What the builder needs to know of a trajectory. */
export interface TrajectoryView {
  readonly messages: readonly ChatMessage[];
  /** Per committed turn, the message count right after it (its assistant message is the last). */
  readonly turnMessageCounts: readonly number[];
  /** Per committed turn, its checkpoint (prompt ids + completion ids). */
  readonly checkpoints: CheckpointView;
}

export interface PromptPlan {
  /** The prompt's ids: a typed array, as a long prompt's ids are copied in memory, not id by id (id-builder.ts). */
  promptIds: Int32Array;
  /** Turns to keep when the request rolls back one turn (0: a retried first turn); undefined when nothing rolls back. */
  rollbackToTurns?: number;
  /** The turn's messages: the request, with the stored copies of the messages it matched (adoptStored). */
  messages: readonly ChatMessage[];
  /** Whether `messages` differs from the request (the request alone does not tell the turn). */
  adopted: boolean;
  /** How many leading ids were copied from the checkpoint the turn continues (the latest once its rollback is applied). */
  copied?: number;
}

/**
 * Renders, or throws TemplateRenderError. Content-part lists (text parts only: other parts
 * are refused with the request, checkContent) reach a template whose content format is
 * "openai" as lists; every other renderer (a "string" template, an encoder in code) gets
 * each list as its texts joined by " ", as SGLang prepares them (chat-template.ts).
 */
export function renderOrThrow(
  renderer: ChatRenderer,
  messages: readonly ChatMessage[],
  options: RenderOptions,
): string {
  try {
    return renderer.render(renderer.contentFormat === undefined ? joinTextParts(messages) : messages, options);
  } catch (err) {
    if (err instanceof TitoError) throw err;
    throw new TemplateRenderError((err as Error).message, { cause: err });
  }
}

/** renderer.renderAppended (undefined when it has none or cannot tell), with renderOrThrow's inputs and errors. */
function renderAppendedOrThrow(
  renderer: ChatRenderer,
  messages: readonly ChatMessage[],
  kept: number,
  options: RenderOptions,
): string | undefined {
  if (!renderer.renderAppended) return undefined;
  try {
    return renderer.renderAppended(
      renderer.contentFormat === undefined ? joinTextParts(messages) : messages,
      kept,
      options,
    );
  } catch (err) {
    if (err instanceof TitoError) throw err;
    throw new TemplateRenderError((err as Error).message, { cause: err });
  }
}

const DUMMY_SYSTEM: ChatMessage = { role: "system", content: "You are a helpful assistant." };

/** Bound of each memo below: cleared whole when full (they hold a handful of entries in practice). */
const MEMO_LIMIT = 1024;

/**
 * Renders of the synthetic base contexts, per renderer and kwargs object, by the base's
 * messages as JSON: the bases are built here from plain JSON values only, so equal JSON
 * is equal input, and a render is a pure function of its input. A base that throws is not stored.
 */
const baseRenders = new WeakMap<ChatRenderer, WeakMap<object, Map<string, string>>>();

function renderBase(ctx: PromptContext, base: ChatMessage[]): string {
  let byKwargs = baseRenders.get(ctx.renderer);
  if (!byKwargs) baseRenders.set(ctx.renderer, (byKwargs = new WeakMap()));
  let memo = byKwargs.get(ctx.kwargs);
  if (!memo) byKwargs.set(ctx.kwargs, (memo = new Map()));
  const key = JSON.stringify(base);
  let text = memo.get(key);
  if (text === undefined) {
    text = renderOrThrow(ctx.renderer, base, { addGenerationPrompt: false, kwargs: ctx.kwargs });
    if (memo.size >= MEMO_LIMIT) memo.clear();
    memo.set(key, text);
  }
  return text;
}

function renderDiff(ctx: PromptContext, base: ChatMessage[], extended: ChatMessage[], what: string): string {
  const short = renderBase(ctx, base);
  const long = renderOrThrow(ctx.renderer, extended, { addGenerationPrompt: false, kwargs: ctx.kwargs });
  if (!long.startsWith(short))
    throw new TokenizationError(`rendering ${what} does not extend the rendering without it`);
  return long.slice(short.length);
}

/**
 * The calls of the dummy assistant a tool run answers: the real calls of the assistant
 * before the run (templates look tool names up by `tool_call_id`, count results against
 * calls, or refuse a result with no call), plus a made-up call for any extra result.
 */
function callsAnswered(segment: readonly ChatMessage[], assistant: ChatMessage | undefined): unknown[] {
  const real = assistant && Array.isArray(assistant.tool_calls) ? assistant.tool_calls : [];
  const calls = real.map((call) => call as unknown);
  for (let i = calls.length; i < segment.length; i++) {
    const m = segment[i]!;
    calls.push({
      id: typeof m.tool_call_id === "string" ? m.tool_call_id : `call_${i}`,
      type: "function",
      function: { name: typeof m.name === "string" ? m.name : "tool", arguments: {} },
    });
  }
  return calls;
}

/** Tokens of one appended segment, rendered against a small synthetic context. */
function segmentIds(ctx: PromptContext, segment: ChatMessage[], assistant: ChatMessage | undefined): number[] {
  if (segment[0]!.role === "tool") {
    // The tool run answers a dummy assistant (empty content, one-space reasoning) with the real calls.
    const dummy = {
      role: "assistant",
      content: "",
      reasoning_content: " ",
      tool_calls: callsAnswered(segment, assistant),
    };
    const base: ChatMessage[] = [DUMMY_SYSTEM, dummy];
    return ctx.folder.encode(renderDiff(ctx, base, [...base, ...segment], "tool messages"));
  }
  return ctx.folder.encode(
    renderDiff(ctx, [DUMMY_SYSTEM], [DUMMY_SYSTEM, ...segment], `a '${segment[0]!.role}' message`),
  );
}

/** A run of consecutive tool messages is one segment; every other message is its own. */
function segmentsOf(appended: readonly ChatMessage[]): ChatMessage[][] {
  const out: ChatMessage[][] = [];
  for (const m of appended) {
    const last = out[out.length - 1];
    if (m.role === "tool" && last && last[0]!.role === "tool") last.push(m);
    else out.push([m]);
  }
  return out;
}

/**
 * Per renderer: the inputs of its template's generation-prompt block when that block is
 * provably a constant suffix (generation-prompt.ts; null when not), the suffix's ids by
 * the JSON of those inputs' values, learned from the first turn that rendered both ways,
 * and whether the template can refuse a conversation as a whole (mayRefuse).
 */
const constantPrompts = new WeakMap<
  ChatRenderer,
  { inputs: string[] | null; ids: Map<string, readonly number[]>; mayRefuse: boolean }
>();

interface ConstantPrompt {
  ids: Map<string, readonly number[]>;
  key: string;
  mayRefuse: boolean;
}

/** The key of the constant generation prompt for this context, or undefined when it is not constant. */
function constantPromptKey(ctx: PromptContext): ConstantPrompt | undefined {
  let known = constantPrompts.get(ctx.renderer);
  if (!known) {
    const template = ctx.renderer.template;
    const inputs = template ? generationPromptInputs(template) : undefined;
    known = { inputs: inputs ?? null, ids: new Map(), mayRefuse: template ? mayRefuse(template) : true };
    constantPrompts.set(ctx.renderer, known);
  }
  if (known.inputs === null) return undefined;
  const context = fixedContext(ctx.folder, ctx.kwargs);
  if (!inputsArePlain(known.inputs, context)) return undefined;
  return {
    ids: known.ids,
    mayRefuse: known.mayRefuse,
    key: JSON.stringify(known.inputs.map((name) => (context[name] === undefined ? [name] : [name, context[name]]))),
  };
}

/**
 * The ids of the generation prompt: the difference between the whole request rendered
 * with it and without it (docs/architecture.md, "The token algorithm"). When that difference
 * is a proven constant suffix whose ids are known, no render is needed for the ids; the
 * conversation is still rendered when the template can refuse it as a whole (mayRefuse),
 * so such a refusal stays a 400. A template that cannot gets the known ids without
 * rendering the whole conversation on every turn (O(conversation) in jinja).
 */
function generationPromptIds(
  ctx: PromptContext,
  messages: readonly ChatMessage[],
  tools?: unknown[],
): readonly number[] {
  const constant = constantPromptKey(ctx);
  const known = constant?.ids.get(constant.key);
  if (known && !constant!.mayRefuse) return known;
  const without = renderOrThrow(ctx.renderer, messages, { addGenerationPrompt: false, kwargs: ctx.kwargs, tools });
  // The same ids the render with the prompt would give: it is `without` + a suffix fixed by the key.
  if (known) return known;
  const withPrompt = renderOrThrow(ctx.renderer, messages, { addGenerationPrompt: true, kwargs: ctx.kwargs, tools });
  if (!withPrompt.startsWith(without))
    throw new TokenizationError("the generation prompt does not extend the rendered conversation");
  const ids = ctx.folder.encode(withPrompt.slice(without.length));
  if (constant) {
    if (constant.ids.size >= MEMO_LIMIT) constant.ids.clear();
    constant.ids.set(constant.key, ids.slice());
  }
  return ids;
}

/**
 * Which committed turns survive when the request diverges from the stored messages: the
 * last one whose messages the request still matches, or none (the empty session: a
 * retried first turn). Either way at most one committed turn may be discarded.
 */
function planRollback(view: TrajectoryView, matched: number): number {
  const counts = view.turnMessageCounts;
  let keep = counts.length;
  while (keep > 0 && counts[keep - 1]! > matched) keep--;
  const discarded = counts.length - keep;
  if (discarded > 1) {
    throw new RollbackError(
      `the request diverges from the session at message index ${matched}, which would discard ${discarded} assistant turns; at most one may be rolled back`,
    );
  }
  return keep;
}

export function planPrompt(
  ctx: PromptContext,
  view: TrajectoryView,
  clientMessages: readonly ChatMessage[],
  tools?: unknown[],
): PromptPlan {
  if (view.checkpoints.count === 0)
    return { promptIds: firstTurnIds(ctx, clientMessages, tools), messages: clientMessages, adopted: false };
  const matched = matchingPrefixLength(view.messages, clientMessages, ctx.matcher);
  const { messages: request, adopted } = adoptStored(view.messages, clientMessages, matched);
  const planned = { messages: request, adopted };
  let keptMessages = view.messages.length;
  let rollbackToTurns: number | undefined;
  if (matched < view.messages.length) {
    rollbackToTurns = planRollback(view, matched);
    // Back to the empty session: the request is a first turn again.
    if (rollbackToTurns === 0) return { promptIds: firstTurnIds(ctx, request, tools), rollbackToTurns, ...planned };
    keptMessages = view.turnMessageCounts[rollbackToTurns - 1]!;
  }
  const appended = request.slice(keptMessages);
  appended.forEach((m, i) => {
    if (!ctx.allowedAppendRoles.includes(m.role))
      throw new AppendRoleError(keptMessages + i, m.role, ctx.allowedAppendRoles, ctx.refusedRoles?.get(m.role));
  });
  // The kept checkpoint, less the trailing ids the family's boundaryDrop leaves out, is the prompt's start.
  const prompt = checkpointIds(view.checkpoints, (rollbackToTurns ?? view.checkpoints.count) - 1);
  const boundary = ctx.family.boundaryIds(prompt.ids);
  prompt.drop(ctx.family.boundaryDrop?.(prompt.ids) ?? 0);
  prompt.push(boundary);
  if (ctx.family.increment === "history" || ctx.renderer.carriesState) {
    prompt.push(historyIncrement(ctx, request, keptMessages, tools));
    return { promptIds: prompt.ids, rollbackToTurns, copied: prompt.filled, ...planned };
  }
  let at = keptMessages;
  for (const segment of segmentsOf(appended)) {
    prompt.push(segmentIds(ctx, segment, lastAssistant(request, at)));
    at += segment.length;
  }
  prompt.push(generationPromptIds(ctx, request, tools));
  return { promptIds: prompt.ids, rollbackToTurns, copied: prompt.filled, ...planned };
}

/** Checkpoint k's ids in a builder the turn's ids are appended to. */
function checkpointIds(view: CheckpointView, k: number): IdBuilder {
  return new IdBuilder(view.lengthOf(k), (out) => (view.copyInto ? view.copyInto(k, out) : out.set(view.ids(k))));
}

/** A first turn renders the whole conversation, generation prompt included. */
function firstTurnIds(ctx: PromptContext, request: readonly ChatMessage[], tools?: unknown[]): Int32Array {
  const text = renderOrThrow(ctx.renderer, request, { addGenerationPrompt: true, kwargs: ctx.kwargs, tools });
  return Int32Array.from(ctx.folder.encode(text));
}

function lastAssistant(messages: readonly ChatMessage[], before: number): ChatMessage | undefined {
  for (let i = before - 1; i >= 0; i--) if (messages[i]!.role === "assistant") return messages[i];
  return undefined;
}

/**
 * The appended messages and the generation prompt as one diff of the real history: the
 * kept messages rendered without a generation prompt, and the whole request with one.
 */
function historyIncrement(
  ctx: PromptContext,
  request: readonly ChatMessage[],
  kept: number,
  tools?: unknown[],
): number[] {
  const options = { kwargs: ctx.kwargs, tools };
  const appended = renderAppendedOrThrow(ctx.renderer, request, kept, { ...options, addGenerationPrompt: true });
  if (appended !== undefined) return ctx.folder.encode(appended);
  const short = renderOrThrow(ctx.renderer, request.slice(0, kept), { ...options, addGenerationPrompt: false });
  const long = renderOrThrow(ctx.renderer, request, { ...options, addGenerationPrompt: true });
  if (!long.startsWith(short))
    throw new TokenizationError("rendering the appended messages does not extend the rendering of the history");
  return ctx.folder.encode(long.slice(short.length));
}

const KNOWN_ROLES = ["tool", "user", "system", "assistant"];

/**
 * The configured append roles (default: the family's, less those the template was found not
 * to render append-only); a known role outside `surface` is a config error, saying why when
 * the probe found why (`refused`).
 */
export function appendRoles(
  family: string,
  surface: readonly string[],
  configured?: string[],
  refused: ReadonlyMap<string, string> = new Map(),
): readonly string[] {
  if (configured === undefined) return surface;
  for (const role of configured)
    if (KNOWN_ROLES.includes(role) && !surface.includes(role))
      throw new SessionConfigError(
        `allowed append role ${JSON.stringify(role)} is not one the ${family} family can append (${refused.get(role) ?? "its template does not render it append-only"}); it allows ${surface.join(", ")}`,
      );
  return configured;
}
