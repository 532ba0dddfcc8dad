// A faster `encode(text)` for byte-level BPE tokenizers (Qwen, Llama 3, GPT-style), giving
// exactly the ids of `tokenizer.encode(text, { add_special_tokens: false }).ids`. It runs
// the tokenizer's own steps in its own order (added-token split, normalizer, the first
// pre-tokenizer's regex split) and caches only what is a pure function of one piece: the
// ids of one regex piece after the ByteLevel stages and the BPE model. Those never look
// beyond their piece (BPE without fuse_unk, ByteLevel), so a cached piece is the same ids
// the library would compute. Any other tokenizer shape gets no fast path (undefined):
// the caller then uses the library's encode. It never changes the tokenizer object.
import * as tokenizers from "@huggingface/tokenizers";
import type { Tokenizer } from "@huggingface/tokenizers";
import { escapeRegExp } from "./escape-regexp.ts";

// The library's classes, exported at run time; the package's type re-exports lose their names.
type AnyClass = abstract new (...args: never[]) => unknown;
const classes = tokenizers as unknown as Record<string, AnyClass | undefined>;
const BPE = classes.BPE;
const ByteLevelPostProcessor = classes.ByteLevelPostProcessor;
const ByteLevelPreTokenizer = classes.ByteLevelPreTokenizer;
const SequencePreTokenizer = classes.SequencePreTokenizer;
const SplitPreTokenizer = classes.SplitPreTokenizer;

interface AddedTokenView {
  id: number;
  lstrip?: boolean;
  rstrip?: boolean;
}

/** The fields of the library's Tokenizer this file reads (they are not in its types). */
interface TokenizerInternals {
  splitter_unnormalized: { split(text: string): string[] };
  splitter_normalized: { split(text: string): string[] };
  added_tokens_map: Map<string, AddedTokenView>;
  remove_space?: boolean;
  do_lowercase_and_remove_accent?: boolean;
  normalizer: ((text: string) => string) | null;
  pre_tokenizer: unknown;
  model: unknown;
  post_processor: unknown;
}

interface PieceStage {
  pre_tokenize(pieces: string[], options?: unknown): string[];
}

/** Pieces longer than this are encoded each time, never cached (as the library's BPE cache). */
const MAX_CACHED_PIECE = 256;
/** The piece cache is dropped whole when it grows past this many entries (a bound, not an LRU). */
const MAX_CACHED_PIECES = 100_000;

/** Applies added tokens' lstrip/rstrip to their neighbours, in place, as the library does. */
function stripAroundAddedTokens(sections: string[], added: Map<string, AddedTokenView>): void {
  for (let i = 0; i < sections.length; i++) {
    const token = added.get(sections[i]!);
    if (!token) continue;
    if (token.lstrip && i > 0) sections[i - 1] = sections[i - 1]!.trimEnd();
    if (token.rstrip && i < sections.length - 1) sections[i + 1] = sections[i + 1]!.trimStart();
  }
}

type Splitter = { split(text: string): string[] };

/** Every word of a DictionarySplitter's trie (the library builds it from the added tokens' contents). */
function trieWords(trie: unknown): string[] | undefined {
  const words: string[] = [];
  const stack: unknown[] = [trie];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== "object") return undefined;
    for (const [key, value] of Object.entries(node)) {
      if (key === "end") {
        if (typeof value !== "string" || value.length === 0) return undefined;
        words.push(value);
      } else if (key.length === 1) stack.push(value);
      else return undefined;
    }
  }
  return words;
}

/**
 * The library's added-token split (DictionarySplitter.split: at each position the longest
 * word starting there, else the next position) as one regex: an alternation of the words,
 * longest first, finds the leftmost position where any word starts and, there, the longest
 * one, which is the same cut. The trie walk indexes the text one character at a time in JS;
 * the regex runs natively. A trie of another shape keeps the library's split.
 */
export function fastSplit(splitter: Splitter): (text: string) => string[] {
  const words = trieWords((splitter as unknown as { trie?: unknown }).trie);
  if (words === undefined) return (text) => splitter.split(text);
  if (words.length === 0) return (text) => (text.length > 0 ? [text] : []);
  words.sort((a, b) => b.length - a.length);
  const pattern = new RegExp(words.map(escapeRegExp).join("|"), "g");
  return (text) => {
    const out: string[] = [];
    let start = 0;
    pattern.lastIndex = 0;
    for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
      if (m.index > start) out.push(text.slice(start, m.index));
      out.push(m[0]);
      start = m.index + m[0].length;
    }
    if (start < text.length) out.push(text.slice(start));
    return out;
  };
}

/** An exact, cached encoder for `tokenizer`, or undefined when its shape is not the supported one. */
export function cachedEncoder(tokenizer: Tokenizer): ((text: string) => number[]) | undefined {
  if (!BPE || !ByteLevelPostProcessor || !ByteLevelPreTokenizer || !SequencePreTokenizer || !SplitPreTokenizer)
    return undefined;
  const t = tokenizer as unknown as TokenizerInternals;
  const model = t.model as ((tokens: string[]) => string[]) & { tokens_to_ids: Map<string, number> };
  if (!(model instanceof BPE) || (model as unknown as { fuse_unk?: boolean }).fuse_unk) return undefined;
  if (t.post_processor !== null && !(t.post_processor instanceof ByteLevelPostProcessor)) return undefined;
  if (t.remove_space === true || t.do_lowercase_and_remove_accent) return undefined;
  if (
    typeof t.splitter_unnormalized?.split !== "function" ||
    typeof t.splitter_normalized?.split !== "function" ||
    !(t.added_tokens_map instanceof Map)
  )
    return undefined;
  const pre = t.pre_tokenizer;
  if (!(pre instanceof SequencePreTokenizer)) return undefined;
  const sequence = (pre as unknown as { tokenizers?: unknown[] }).tokenizers;
  if (!Array.isArray(sequence) || sequence.length < 2) return undefined;
  const [first, ...rest] = sequence;
  if (!(first instanceof SplitPreTokenizer) || !rest.every((stage) => stage instanceof ByteLevelPreTokenizer))
    return undefined;
  const split = first as unknown as { pre_tokenize_text(text: string): string[] };
  const stages = rest as unknown as PieceStage[];

  const added = t.added_tokens_map;
  const toIds = model.tokens_to_ids;
  const unk = (model as unknown as { unk_token_id?: number }).unk_token_id;
  const normalizer = t.normalizer;
  const splitUnnormalized = fastSplit(t.splitter_unnormalized);
  const splitNormalized = fastSplit(t.splitter_normalized);
  const pieces = new Map<string, number[]>();

  // What the library computes for one regex piece: the ByteLevel stages, the model, then
  // token -> id with added tokens first (Tokenizer.encode's lookup order).
  const pieceIds = (piece: string): number[] => {
    let parts = [piece];
    for (const stage of stages) parts = stage.pre_tokenize(parts);
    return model(parts).map((token: string) => added.get(token)?.id ?? toIds.get(token) ?? (unk as number));
  };

  return (text: string): number[] => {
    const out: number[] = [];
    const sections = splitUnnormalized(text);
    stripAroundAddedTokens(sections, added);
    for (let section of sections) {
      if (section.length === 0) continue;
      const whole = added.get(section);
      if (whole) {
        out.push(whole.id);
        continue;
      }
      if (normalizer !== null) section = normalizer(section);
      if (section.length === 0) continue;
      const subsections = splitNormalized(section);
      stripAroundAddedTokens(subsections, added);
      for (const sub of subsections) {
        if (sub.length === 0) continue;
        const token = added.get(sub);
        if (token) {
          out.push(token.id);
          continue;
        }
        for (const piece of split.pre_tokenize_text(sub)) {
          let ids = pieces.get(piece);
          if (ids === undefined) {
            ids = pieceIds(piece);
            if (piece.length <= MAX_CACHED_PIECE) {
              if (pieces.size >= MAX_CACHED_PIECES) pieces.clear();
              pieces.set(piece, ids);
            }
          }
          for (let i = 0; i < ids.length; i++) out.push(ids[i]!);
        }
      }
    }
    return out;
  };
}
