// The token strip of a session view (docs/viewer.md): every token of the trajectory as a
// cell with its text, coloured by where it stands in the loss (prompt, masked, in the loss
// with a heat scale of its logprob), turn boundaries as header rows that name the turn's
// weight version, and drift spans outlined. A 100k-token trajectory stays responsive: the
// layout (which token goes on which row) is computed once per width into typed arrays, and
// only the rows in view (plus a margin) exist in the DOM.
import { h } from "./dom.ts";
import type { SampleTurn } from "./types.ts";

export interface StripData {
  tokens: readonly number[];
  texts: readonly string[];
  /** Over the response: the last `lossMask.length` tokens. */
  lossMask: readonly number[];
  logProbs: readonly number[];
  turns: readonly SampleTurn[];
  /** Token ranges [start, end) the drift report points at. */
  drift: readonly { start: number; end: number }[];
}

export type TokenKind = "prompt" | "masked" | "loss";

const ROW_PX = 20;
const OVERSCAN_ROWS = 10;
const MAX_CHARS = 24;
const FONT = '12px ui-monospace, "DejaVu Sans Mono", monospace';
/** A cell's padding and border, in pixels. */
const CELL_EXTRA_PX = 3;
/** A turn header row (negative: never a token index). */
const HEAD = -1;

/** A token's text with whitespace made visible, cut to MAX_CHARS. */
export function shown(text: string): string {
  const visible = text.replace(/\n/g, "↵").replace(/\t/g, "→").replace(/ /g, "·");
  return visible.length > MAX_CHARS ? `${visible.slice(0, MAX_CHARS - 1)}…` : visible || "∅";
}

/** Green for a likely token, through yellow, to red for an unlikely one. */
export function heat(logprob: number): string {
  const p = Math.exp(Math.min(0, logprob));
  return `hsl(${Math.round(120 * p)} 70% 78%)`;
}

export class TokenStrip {
  readonly el: HTMLElement;
  readonly #data: StripData;
  readonly #offset: number;
  readonly #scroller: HTMLElement;
  readonly #rows: HTMLElement;
  readonly #tip: HTMLElement;
  readonly #turnOf: Int32Array;
  readonly #drift: Uint8Array;
  readonly #completionStart: Uint8Array;
  #hits: Uint8Array;
  /** Per row: its first token, or HEAD - turn for a turn header row. */
  #rowStart = new Int32Array(0);
  #rowEnd = new Int32Array(0);
  #rowOf: Int32Array;
  #width = 0;
  #frame = 0;
  readonly #resize: ResizeObserver;

  constructor(data: StripData, tip: HTMLElement) {
    this.#data = data;
    const n = data.tokens.length;
    this.#offset = n - data.lossMask.length;
    this.#tip = tip;
    this.#turnOf = new Int32Array(n).fill(-1);
    this.#completionStart = new Uint8Array(n);
    data.turns.forEach((t, k) => {
      this.#turnOf.fill(k, t.prompt_start, Math.min(n, t.completion_end));
      if (t.completion_start < n) this.#completionStart[t.completion_start] = 1;
    });
    this.#drift = new Uint8Array(n);
    for (const d of data.drift) this.#drift.fill(1, Math.max(0, d.start), Math.min(n, d.end));
    this.#hits = new Uint8Array(n);
    this.#rowOf = new Int32Array(n);
    this.#rows = h("div", { class: "strip-rows" });
    this.#scroller = h("div", { class: "strip", tabindex: 0 }, this.#rows);
    this.el = this.#scroller;
    this.#scroller.addEventListener("scroll", () => this.#schedule());
    this.#rows.addEventListener("mouseover", (e) => this.#hover(e as MouseEvent));
    this.#rows.addEventListener("mouseleave", () => (this.#tip.hidden = true));
    // Laid out in the next frame, not inside the observer's callback: a layout that changed
    // the page's size there would be a resize the browser reports as an error.
    this.#resize = new ResizeObserver(() => requestAnimationFrame(() => this.#relayout()));
    this.#resize.observe(this.#scroller);
  }

  kind(i: number): TokenKind {
    if (i < this.#offset) return "prompt";
    return this.#data.lossMask[i - this.#offset] === 1 ? "loss" : "masked";
  }

  logprob(i: number): number | null {
    return i < this.#offset ? null : this.#data.logProbs[i - this.#offset]!;
  }

  /** How many tokens of each kind the strip shows (the same kind() its cells are coloured by). */
  counts(): Record<TokenKind, number> {
    const counts = { prompt: 0, masked: 0, loss: 0 };
    for (let i = 0; i < this.#data.tokens.length; i++) counts[this.kind(i)]++;
    return counts;
  }

  dispose(): void {
    this.#resize.disconnect();
    cancelAnimationFrame(this.#frame);
    this.#tip.hidden = true;
  }

  /** Scrolls so that token `i` is in view, a few rows below the top. */
  scrollToToken(i: number): void {
    if (this.#width === 0) this.#relayout();
    this.#scroller.scrollTop = Math.max(0, (this.#rowOf[i]! - 3) * ROW_PX);
    this.#render();
  }

  /**
   * Marks the tokens that match `query` and returns the first token of each match: `#123`
   * finds token id 123, anything else the text (across token boundaries).
   */
  search(query: string): number[] {
    const { tokens, texts } = this.#data;
    this.#hits = new Uint8Array(tokens.length);
    const found: number[] = [];
    const id = /^#(\d+)$/.exec(query.trim());
    if (id) {
      const wanted = Number(id[1]);
      tokens.forEach((t, i) => {
        if (t !== wanted) return;
        found.push(i);
        this.#hits[i] = 1;
      });
    } else if (query !== "") {
      const starts = new Int32Array(texts.length + 1);
      texts.forEach((t, i) => (starts[i + 1] = starts[i]! + t.length));
      const joined = texts.join("");
      const tokenAt = (pos: number) => {
        let lo = 0;
        let hi = texts.length - 1;
        while (lo < hi) {
          const mid = (lo + hi + 1) >> 1;
          if (starts[mid]! <= pos) lo = mid;
          else hi = mid - 1;
        }
        return lo;
      };
      for (let at = joined.indexOf(query); at >= 0 && found.length < 10_000; at = joined.indexOf(query, at + 1)) {
        const first = tokenAt(at);
        if (found.at(-1) !== first) found.push(first);
        this.#hits.fill(1, first, tokenAt(at + query.length - 1) + 1);
      }
    }
    this.#render();
    return found;
  }

  #schedule(): void {
    if (this.#frame !== 0) return;
    this.#frame = requestAnimationFrame(() => {
      this.#frame = 0;
      this.#render();
    });
  }

  #relayout(): void {
    const width = this.#scroller.clientWidth - 4;
    if (width <= 0 || width === this.#width) return;
    this.#width = width;
    const ctx = document.createElement("canvas").getContext("2d")!;
    ctx.font = FONT;
    const charPx = ctx.measureText("M").width;
    const { tokens, texts, turns } = this.#data;
    const starts: number[] = [];
    const ends: number[] = [];
    let open = -1; // the first token of the row being filled; -1: none
    let x = 0;
    const close = (end: number) => {
      if (open >= 0 && end > open) {
        starts.push(open);
        ends.push(end);
      }
      open = -1;
      x = 0;
    };
    let turn = 0;
    for (let i = 0; i < tokens.length; i++) {
      if (turn < turns.length && turns[turn]!.prompt_start === i) {
        close(i);
        starts.push(HEAD - turn++);
        ends.push(i);
      } else if (this.#completionStart[i] === 1) close(i);
      const text = texts[i] ?? "";
      const w = shown(text).length * charPx + CELL_EXTRA_PX;
      if (open >= 0 && x + w > width) close(i);
      if (open < 0) open = i;
      // The row this token is on gets the next index once it is closed.
      this.#rowOf[i] = starts.length;
      x += w;
      if (text.includes("\n")) close(i + 1);
    }
    close(tokens.length);
    this.#rowStart = Int32Array.from(starts);
    this.#rowEnd = Int32Array.from(ends);
    this.#rows.style.height = `${starts.length * ROW_PX}px`;
    this.#render();
  }

  #render(): void {
    const first = Math.max(0, Math.floor(this.#scroller.scrollTop / ROW_PX) - OVERSCAN_ROWS);
    const visible = Math.ceil(this.#scroller.clientHeight / ROW_PX) + 2 * OVERSCAN_ROWS;
    const last = Math.min(this.#rowStart.length, first + visible);
    const fragment = document.createDocumentFragment();
    for (let r = first; r < last; r++) fragment.appendChild(this.#row(r));
    this.#rows.replaceChildren(fragment);
  }

  #row(r: number): HTMLElement {
    const start = this.#rowStart[r]!;
    const top = `top:${r * ROW_PX}px`;
    if (start <= HEAD) {
      const k = HEAD - start;
      const t = this.#data.turns[k]!;
      const engine = t.engine_weight_version ? ` (engine ${t.engine_weight_version})` : "";
      const label =
        `turn ${k + 1} · weight version ${t.weight_version ?? "none"}${engine} · finish ${t.finish_reason ?? "—"}` +
        ` · prompt ${t.prompt_start}–${t.completion_start} · completion ${t.completion_start}–${t.completion_end}` +
        (t.truncated ? " · truncated" : "");
      return h("div", { class: "strip-row turn-head", style: top, "data-turn": k }, label);
    }
    const row = h("div", { class: "strip-row", style: top });
    const { tokens, texts } = this.#data;
    for (let i = start; i < this.#rowEnd[r]!; i++) {
      const kind = this.kind(i);
      let cls = `tok ${kind}`;
      if (this.#drift[i] === 1) cls += " drift";
      if (this.#hits[i] === 1) cls += " hit";
      if (this.#completionStart[i] === 1) cls += " completion-start";
      const text = shown(texts[i] ?? "");
      const cell = h("span", { class: cls, "data-i": i, "data-id": tokens[i]! }, text);
      if (kind === "loss") cell.style.background = heat(this.logprob(i)!);
      row.appendChild(cell);
    }
    return row;
  }

  #hover(e: MouseEvent): void {
    const cell = (e.target as HTMLElement).closest<HTMLElement>(".tok");
    if (!cell) return;
    const i = Number(cell.dataset.i);
    const lp = this.logprob(i);
    const k = this.#turnOf[i]!;
    const turn = k >= 0 ? this.#data.turns[k] : undefined;
    const field = (name: string, value: string) => h("span", { "data-field": name }, value);
    const kindText = { prompt: "first prompt (outside the response)", masked: "masked (0)", loss: "in the loss (1)" };
    this.#tip.replaceChildren(
      "id ",
      field("id", String(this.#data.tokens[i])),
      "  position ",
      field("position", String(i)),
      "\ntext ",
      field("text", JSON.stringify(this.#data.texts[i] ?? "")),
      "\nlogprob ",
      field("logprob", lp === null ? "—" : lp.toFixed(4)),
      "\nloss mask ",
      field("kind", kindText[this.kind(i)]),
      "\nturn ",
      field("turn", turn ? `${k + 1}, weight version ${turn.weight_version ?? "none"}` : "—"),
      this.#drift[i] === 1 ? "\ndrift: the mismatch report points here" : "",
    );
    this.#tip.hidden = false;
    const x = Math.min(e.clientX + 12, window.innerWidth - this.#tip.offsetWidth - 8);
    this.#tip.style.left = `${x}px`;
    this.#tip.style.top = `${e.clientY + 16}px`;
  }
}
