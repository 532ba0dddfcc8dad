// A small real tokenizer folder for families no npm package ships a tokenizer for: a
// byte-level BPE whose vocabulary is the 256 byte symbols plus a few merges, with the
// family's special tokens as added tokens at the ids the family uses, and a chat template
// in the family's format. It encodes any text (every byte has a token) and loads through
// the same loader as a real folder, so families see a real TokenizerFolder.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadTokenizerFolder, type TokenizerFolder } from "../../sessions/tokenizer-folder.ts";

/** GPT-2's byte -> printable character map, as byte-level BPE vocabularies spell bytes. */
function byteSymbols(): string[] {
  const printable: number[] = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const out: string[] = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++)
    out[b] = printable.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + extra++);
  return out;
}

export interface AddedToken {
  content: string;
  /** Default: the next free id after the vocabulary and the tokens before it. */
  id?: number;
  /** Default true (flagged special: splits drift segments unless the family pins its own set). */
  special?: boolean;
}

export interface SyntheticFolderSpec {
  added: AddedToken[];
  /** Jinja chat template in the family's format. */
  template: string;
  /** Extra tokenizer_config.json fields (bos_token, eos_token, …). */
  config?: Record<string, unknown>;
  /** Written to config.json as `model_type` when given. */
  modelType?: string;
  /** Merges over the byte symbols (each "a b"); a few make multi-byte tokens exist. */
  merges?: string[];
}

/** Writes the folder to a fresh temp dir and loads it. */
export function syntheticFolder(spec: SyntheticFolderSpec): TokenizerFolder {
  const symbols = byteSymbols();
  const vocab: Record<string, number> = {};
  symbols.forEach((s, i) => (vocab[s] = i));
  const merges = spec.merges ?? [];
  for (const merge of merges) {
    const [a, b] = merge.split(" ");
    if (vocab[a! + b!] === undefined) vocab[a! + b!] = Object.keys(vocab).length;
  }
  let next = Object.keys(vocab).length;
  const added = spec.added.map((t) => {
    const id = t.id ?? next;
    next = Math.max(next, id + 1);
    return {
      id,
      content: t.content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: t.special ?? true,
    };
  });
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: true };
  const tokenizer = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
  const dir = mkdtempSync(join(tmpdir(), "tito-synthetic-tokenizer-"));
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tokenizer));
  writeFileSync(
    join(dir, "tokenizer_config.json"),
    JSON.stringify({ chat_template: spec.template, ...spec.config, tokenizer_class: "PreTrainedTokenizerFast" }),
  );
  if (spec.modelType !== undefined)
    writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: spec.modelType }));
  return loadTokenizerFolder(dir);
}
