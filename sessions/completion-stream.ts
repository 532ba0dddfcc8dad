// Parses a completion while it is generated, for a streamed reply: the text comes in
// pieces, and what the family's parser will say of the whole text comes out as deltas —
// reasoning and content as they become certain, a tool call once its block has closed.
// The family's parseCompletion stays the one source of truth: nothing is emitted that the
// parse of the finished text does not begin with, and `finish` checks that it does.
//
// How a piece is judged (the family's streamSyntax names its markers and tool-call blocks):
// - a tail that may be the start of a marker, of a stop string, or an unfinished UTF-8
//   character (U+FFFD) is held back, and so is everything from a tool-call opener whose
//   block has not closed;
// - the rest, u, is parsed as it is and once more followed by each marker (u + "</think>"
//   tells whether text so far could still turn out to be reasoning); the content and
//   reasoning every parse agrees on, up to trailing whitespace, and the tool calls every
//   parse agrees on are certain;
// - once a parse shows that plain text appended to u flows into one channel (content or
//   reasoning) and nothing pending can change that, later pieces without a character that
//   starts a marker go straight to that channel with no parse at all. Parsing is needed
//   only when such a character comes, so a long completion costs a parse per marker
//   character (a few per tool call), not per piece.
// Tool-call ids are fixed per call position for the whole stream, so every parse, and the
// final one that the record keeps, names a call the same way.
// A family with no streamSyntax gets everything at `finish`: correct, just not incremental.
import type { ParseContext, ParsedCompletion, TitoFamily, ToolCall } from "./families/index.ts";
import { newToolCallId } from "./families/index.ts";
import { StreamDivergedError } from "./errors.ts";

/** What became certain since the last delta. */
export interface CompletionDelta {
  reasoning: string;
  content: string;
  /** New tool calls, in order; `index` is the call's position in the message. */
  toolCalls: Array<ToolCall & { index: number }>;
}

export interface CompletionStreamOptions extends ParseContext {
  /** The request's stop strings: a tail that may be one's start is held (the engine cuts a matched one off). */
  stop?: readonly string[];
}

type Channel = "content" | "reasoning";
/** The channel plain text flows into, and that channel's whole value so far (trailing whitespace included). */
type Flow = { channel: Channel; value: string } | undefined;
const SENTINEL = "\u2063"; // invisible separator: neither whitespace nor any marker's start
const REPLACEMENT = "\uFFFD";

interface Parsed {
  reasoning: string;
  content: string;
  calls: ToolCall[];
}

const empty = (): CompletionDelta => ({ reasoning: "", content: "", toolCalls: [] });
const sameCall = (a: ToolCall | undefined, b: ToolCall | undefined) =>
  a !== undefined &&
  b !== undefined &&
  a.id === b.id &&
  a.function.name === b.function.name &&
  a.function.arguments === b.function.arguments;

function commonPrefix(values: readonly string[]): string {
  let out = values[0]!;
  for (const v of values) {
    let i = 0;
    const n = Math.min(out.length, v.length);
    while (i < n && out.charCodeAt(i) === v.charCodeAt(i)) i++;
    out = out.slice(0, i);
  }
  return out;
}

export class CompletionStream {
  readonly #family: TitoFamily;
  readonly #context: ParseContext;
  readonly #markers: readonly string[]; // probed and held
  readonly #holds: readonly string[]; // held only (stop strings)
  readonly #starts: ReadonlySet<string>; // first characters of all of them
  readonly #ids: string[] = [];
  #idCursor = 0;
  readonly #newId: () => string;
  #text = "";
  #sent = { reasoning: "", content: "" };
  #sentCalls: ToolCall[] = [];
  #flow: Flow;
  /** The next piece is parsed even without a marker character (at the start, and after a held tail). */
  #stale = true;

  constructor(family: TitoFamily, options: CompletionStreamOptions = {}) {
    this.#family = family;
    this.#newId = options.newId ?? newToolCallId;
    const syntax = family.streamSyntax;
    this.#markers = syntax
      ? [...new Set([...syntax.markers, ...syntax.blocks.flatMap((b) => [...b.open, ...b.close])])]
      : [];
    this.#holds = [...(options.stop ?? []).filter((s) => s.length > 0), REPLACEMENT];
    this.#starts = new Set([...this.#markers, ...this.#holds].map((m) => m[0]!));
    this.#context = { tools: options.tools, kwargs: options.kwargs, newId: () => this.#nextId() };
  }

  /** The k-th call of every parse gets the same id (the count restarts with each parse). */
  #nextId(): string {
    const k = this.#idCursor++;
    return (this.#ids[k] ??= this.#newId());
  }

  /** Appends the next piece of the completion text; returns what became certain. */
  append(piece: string): CompletionDelta {
    if (piece.length === 0) return empty();
    this.#text += piece;
    if (this.#family.streamSyntax === undefined) return empty();
    const plain = ![...this.#starts].some((c) => piece.includes(c));
    // Plain text extends a flowing channel as it is, once the channel holds more than
    // whitespace (before that, a parser may still trim what leads it).
    if (plain && this.#flow !== undefined && this.#flow.value.trim() !== "") {
      this.#flow.value += piece;
      return this.#emitFlow();
    }
    if (plain && !this.#stale && this.#flow === undefined) return empty(); // it cannot settle what a marker left open
    return this.#analyze();
  }

  /** The whole completion text (the engine's final text): the last delta and the parsed completion. */
  finish(text: string): { delta: CompletionDelta; parsed: ParsedCompletion } {
    this.#text = text;
    const parsed = this.#parse(text);
    const final = this.#simple(parsed);
    const delta = empty();
    if (!final.reasoning.startsWith(this.#sent.reasoning) || !final.content.startsWith(this.#sent.content))
      throw new StreamDivergedError(this.#family.name, "text sent as content or reasoning");
    for (const [i, call] of this.#sentCalls.entries())
      if (!sameCall(call, final.calls[i])) throw new StreamDivergedError(this.#family.name, `tool call ${i}`);
    delta.reasoning = final.reasoning.slice(this.#sent.reasoning.length);
    delta.content = final.content.slice(this.#sent.content.length);
    delta.toolCalls = final.calls
      .slice(this.#sentCalls.length)
      .map((c, j) => ({ ...c, index: this.#sentCalls.length + j }));
    this.#sent = { reasoning: final.reasoning, content: final.content };
    this.#sentCalls = final.calls;
    return { delta, parsed };
  }

  #parse(text: string): ParsedCompletion {
    this.#idCursor = 0;
    return this.#family.parseCompletion(text, this.#context);
  }

  #simple(p: ParsedCompletion): Parsed {
    return { reasoning: p.reasoning_content ?? "", content: p.content, calls: p.tool_calls ?? [] };
  }

  #analyze(): CompletionDelta {
    const text = this.#text;
    const tail = this.#tailStart(text);
    const cut = this.#heldWhole(text) ? 0 : Math.min(tail, this.#openBlockStart(text));
    this.#stale = tail < text.length;
    const u = text.slice(0, cut);
    const base = this.#simple(this.#parse(u));
    const all = [base, ...this.#markers.map((m) => this.#simple(this.#parse(u + m)))];
    const reasoning = commonPrefix(all.map((p) => p.reasoning)).trimEnd();
    const content = commonPrefix(all.map((p) => p.content)).trimEnd();
    const delta = this.#emit(reasoning, content);
    for (let k = this.#sentCalls.length; all.every((p) => sameCall(p.calls[k], base.calls[k])); k++) {
      const call = base.calls[k]!;
      this.#sentCalls.push(call);
      delta.toolCalls.push({ ...call, index: k });
    }
    this.#flow = cut === text.length ? this.#flowOf(u, base, reasoning, content) : undefined;
    return delta;
  }

  /** Whether plain text after `u` goes into one channel, with nothing pending that could move it. */
  #flowOf(u: string, base: Parsed, reasoning: string, content: string): Flow {
    const probe = this.#simple(this.#parse(u + SENTINEL));
    if (probe.calls.length !== base.calls.length) return undefined;
    for (const channel of ["content", "reasoning"] as const) {
      const other = channel === "content" ? "reasoning" : "content";
      const value = probe[channel];
      const agreed = channel === "content" ? content : reasoning;
      if (
        value.endsWith(SENTINEL) &&
        probe[other] === base[other] &&
        base[channel].trimEnd() === agreed &&
        (other === "content" ? content : reasoning) === base[other].trimEnd()
      )
        return { channel, value: value.slice(0, -SENTINEL.length) };
    }
    return undefined;
  }

  #emitFlow(): CompletionDelta {
    const flow = this.#flow!;
    const value = flow.value.trimEnd();
    return flow.channel === "content" ? this.#emit(this.#sent.reasoning, value) : this.#emit(value, this.#sent.content);
  }

  /** Moves what was sent forward to these agreed values, where they extend it. */
  #emit(reasoning: string, content: string): CompletionDelta {
    const delta = empty();
    if (reasoning.length > this.#sent.reasoning.length && reasoning.startsWith(this.#sent.reasoning)) {
      delta.reasoning = reasoning.slice(this.#sent.reasoning.length);
      this.#sent.reasoning = reasoning;
    }
    if (content.length > this.#sent.content.length && content.startsWith(this.#sent.content)) {
      delta.content = content.slice(this.#sent.content.length);
      this.#sent.content = content;
    }
    return delta;
  }

  /**
   * Where a tail starts that may begin a marker (a whole one is the parser's business), or
   * is or may begin a stop string or ends in an unfinished character; the text's length if none.
   */
  #tailStart(text: string): number {
    // A whole marker that ends the text is the parser's: no partial one is looked for inside it.
    let whole = 0;
    for (const m of this.#markers) if (text.endsWith(m)) whole = Math.max(whole, m.length);
    let start = text.length;
    const held = (list: readonly string[], self: number, end: number) => {
      for (const m of list)
        for (let i = Math.max(0, text.length - m.length + 1 - self); i < Math.min(start, end); i++)
          if (m.startsWith(text.slice(i))) {
            start = i;
            break;
          }
    };
    held(this.#markers, 0, text.length - whole);
    held(this.#holds, 1, text.length);
    return start;
  }

  /** Whether the text starts with (or so far is the start of) one of the family's leading texts. */
  #heldWhole(text: string): boolean {
    const leading = this.#family.streamSyntax?.leading ?? [];
    return leading.some((l) => text.startsWith(l) || l.startsWith(text));
  }

  /** Where the first tool-call block that has not closed opens (the text's length if none). */
  #openBlockStart(text: string): number {
    const blocks = this.#family.streamSyntax?.blocks ?? [];
    let first = text.length;
    for (const block of blocks) {
      let at = 0;
      if (block.startsOpen === true && !block.open.some((o) => text.startsWith(o))) {
        const close = firstOf(text, block.close, 0);
        if (close === undefined) return 0;
        at = close.at + close.length;
      }
      for (;;) {
        const open = firstOf(text, block.open, at);
        if (open === undefined || open.at >= first) break;
        const close = firstOf(text, block.close, open.at + open.length);
        if (close === undefined) {
          first = open.at;
          break;
        }
        at = close.at + close.length;
      }
    }
    return first;
  }
}

function firstOf(text: string, needles: readonly string[], from: number): { at: number; length: number } | undefined {
  let best: { at: number; length: number } | undefined;
  for (const n of needles) {
    const at = text.indexOf(n, from);
    if (at !== -1 && (best === undefined || at < best.at)) best = { at, length: n.length };
  }
  return best;
}
