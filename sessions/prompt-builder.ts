// Builds the prompt ids of one chat turn (docs/architecture.md, "The token algorithm"): the
// first turn renders the whole conversation; later turns detect a one-step rollback,
// enforce append-only + allowed roles, tokenize only the appended messages segment by
// segment, add the generation prompt, and join it all to the accumulated ids with the
// family's boundary fix. It plans; it never mutates the trajectory (the caller applies
// the rollback it returns) and never re-tokenizes what the model produced.
import { fixedContext, renderChat, templateOf, type ChatMessage, type RenderOptions } from "./chat-template.ts";
import { AppendRoleError, RollbackError, TemplateRenderError, TitoError, TokenizationError } from "./errors.ts";
import { generationPromptInputs, inputsArePlain } from "./generation-prompt.ts";
import { matchingPrefixLength } from "./message-compare.ts";
import type { TitoFamily } from "./families/index.ts";
import type { TokenizerFolder } from "./tokenizer-folder.ts";

export interface PromptContext {
  folder: TokenizerFolder;
  family: TitoFamily;
  kwargs: Record<string, unknown>;
  allowedAppendRoles: readonly string[];
}

/** What the builder needs to know of a trajectory. */
export interface TrajectoryView {
  readonly messages: readonly ChatMessage[];
  /** Per committed turn, the message count right after it (its assistant message is the last). */
  readonly turnMessageCounts: readonly number[];
  /** Per committed turn, its checkpoint (prompt ids + completion ids). */
  readonly checkpoints: readonly (readonly number[])[];
}

export interface PromptPlan {
  promptIds: number[];
  /** The committed checkpoint promptIds extends (its first ids); undefined on a first turn. */
  base?: readonly number[];
  /** Turns to keep when the request rolls back one turn; undefined when nothing rolls back. */
  rollbackToTurns?: number;
}

/** Renders; a template that throws on the client's messages is bad input, not a bug. */
export function renderOrThrow(
  folder: TokenizerFolder,
  messages: readonly ChatMessage[],
  options: RenderOptions,
): string {
  try {
    return renderChat(folder, messages, options);
  } catch (err) {
    if (err instanceof TitoError) throw err;
    throw new TemplateRenderError((err as Error).message, { cause: err });
  }
}

const DUMMY_SYSTEM: ChatMessage = { role: "system", content: "You are a helpful assistant." };

/** Bound of each memo below: cleared whole when full (they hold a handful of entries in practice). */
const MEMO_LIMIT = 1024;

/**
 * Renders of the synthetic base contexts, per folder and kwargs object, by the base's
 * messages as JSON: the bases are built here from strings only, so equal JSON is equal
 * input, and a render is a pure function of its input. A base that throws is not stored.
 */
const baseRenders = new WeakMap<TokenizerFolder, WeakMap<object, Map<string, string>>>();

function renderBase(ctx: PromptContext, base: ChatMessage[]): string {
  let byKwargs = baseRenders.get(ctx.folder);
  if (!byKwargs) baseRenders.set(ctx.folder, (byKwargs = new WeakMap()));
  let memo = byKwargs.get(ctx.kwargs);
  if (!memo) byKwargs.set(ctx.kwargs, (memo = new Map()));
  const key = JSON.stringify(base);
  let text = memo.get(key);
  if (text === undefined) {
    text = renderOrThrow(ctx.folder, base, { addGenerationPrompt: false, kwargs: ctx.kwargs });
    if (memo.size >= MEMO_LIMIT) memo.clear();
    memo.set(key, text);
  }
  return text;
}

function renderDiff(ctx: PromptContext, base: ChatMessage[], extended: ChatMessage[], what: string): string {
  const short = renderBase(ctx, base);
  const long = renderOrThrow(ctx.folder, extended, { addGenerationPrompt: false, kwargs: ctx.kwargs });
  if (!long.startsWith(short))
    throw new TokenizationError(`rendering ${what} does not extend the rendering without it`);
  return long.slice(short.length);
}

/** Tokens of one appended segment, rendered against a small synthetic context. */
function segmentIds(ctx: PromptContext, segment: ChatMessage[]): number[] {
  if (segment[0]!.role === "tool") {
    // The tool run answers a dummy assistant whose calls match the responses one to one.
    const calls = segment.map((m, i) => ({
      id: typeof m.tool_call_id === "string" ? m.tool_call_id : `call_${i}`,
      type: "function",
      function: { name: typeof m.name === "string" ? m.name : "tool", arguments: {} },
    }));
    const base: ChatMessage[] = [DUMMY_SYSTEM, { role: "assistant", content: "", tool_calls: calls }];
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
 * Per folder: the inputs of its template's generation-prompt block when that block is
 * provably a constant suffix (generation-prompt.ts; null when not), and the suffix's ids
 * by the JSON of those inputs' values, learned from the first turn that rendered both ways.
 */
const constantPrompts = new WeakMap<
  TokenizerFolder,
  { inputs: string[] | null; ids: Map<string, readonly number[]> }
>();

/** The key of the constant generation prompt for this context, or undefined when it is not constant. */
function constantPromptKey(ctx: PromptContext): { ids: Map<string, readonly number[]>; key: string } | undefined {
  let known = constantPrompts.get(ctx.folder);
  if (!known)
    constantPrompts.set(
      ctx.folder,
      (known = { inputs: generationPromptInputs(templateOf(ctx.folder)) ?? null, ids: new Map() }),
    );
  if (known.inputs === null) return undefined;
  const context = fixedContext(ctx.folder, ctx.kwargs);
  if (!inputsArePlain(known.inputs, context)) return undefined;
  return {
    ids: known.ids,
    key: JSON.stringify(known.inputs.map((name) => (context[name] === undefined ? [name] : [name, context[name]]))),
  };
}

function generationPromptIds(
  ctx: PromptContext,
  messages: readonly ChatMessage[],
  tools?: unknown[],
): readonly number[] {
  // Rendered even when the suffix is known: a conversation the template rejects is still a 400.
  const without = renderOrThrow(ctx.folder, messages, { addGenerationPrompt: false, kwargs: ctx.kwargs, tools });
  const constant = constantPromptKey(ctx);
  const known = constant?.ids.get(constant.key);
  // The same ids the render with the prompt would give: it is `without` + a suffix fixed by the key.
  if (known) return known;
  const withPrompt = renderOrThrow(ctx.folder, messages, { addGenerationPrompt: true, kwargs: ctx.kwargs, tools });
  if (!withPrompt.startsWith(without))
    throw new TokenizationError("the generation prompt does not extend the rendered conversation");
  const ids = ctx.folder.encode(withPrompt.slice(without.length));
  if (constant) {
    if (constant.ids.size >= MEMO_LIMIT) constant.ids.clear();
    constant.ids.set(constant.key, ids.slice());
  }
  return ids;
}

/** Which committed turns survive when the request diverges from the stored messages. */
function planRollback(view: TrajectoryView, matched: number): number {
  const counts = view.turnMessageCounts;
  let keep = counts.length;
  while (keep > 0 && counts[keep - 1]! > matched) keep--;
  if (keep === 0) {
    throw new RollbackError(
      `the request diverges from the session at message index ${matched}, before its first assistant turn`,
    );
  }
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
  request: readonly ChatMessage[],
  tools?: unknown[],
): PromptPlan {
  if (view.checkpoints.length === 0) {
    const text = renderOrThrow(ctx.folder, request, { addGenerationPrompt: true, kwargs: ctx.kwargs, tools });
    return { promptIds: ctx.folder.encode(text) };
  }
  const matched = matchingPrefixLength(view.messages, request);
  let keptMessages = view.messages.length;
  let rollbackToTurns: number | undefined;
  if (matched < view.messages.length) {
    rollbackToTurns = planRollback(view, matched);
    keptMessages = view.turnMessageCounts[rollbackToTurns - 1]!;
  }
  const appended = request.slice(keptMessages);
  appended.forEach((m, i) => {
    if (!ctx.allowedAppendRoles.includes(m.role))
      throw new AppendRoleError(keptMessages + i, m.role, ctx.allowedAppendRoles);
  });
  const base = view.checkpoints[(rollbackToTurns ?? view.checkpoints.length) - 1]!;
  const promptIds = [...base, ...ctx.family.boundaryIds(base)];
  for (const segment of segmentsOf(appended)) for (const id of segmentIds(ctx, segment)) promptIds.push(id);
  for (const id of generationPromptIds(ctx, request, tools)) promptIds.push(id);
  return { promptIds, base, rollbackToTurns };
}
