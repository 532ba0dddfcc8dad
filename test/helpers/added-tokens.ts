// Edits a tokenizer.json's added_tokens without parsing the rest of the file: the test
// folders that lay other control tokens over a real npm tokenizer (deepseek-folder.ts,
// kimi-inkling-folders.ts) change only that list, and a JSON.parse and JSON.stringify of the
// whole 4-12 MB file (its vocabulary and merges) cost ~0.2-0.6 CPU s per folder built. The
// file's other bytes are kept as they are; the list is written back as JSON.stringify writes
// it. The tokenizer library and the Rust tokenizers read the result as any tokenizer.json.
import { JsonScanner } from "../../buffers/json-scan.ts";

export interface AddedToken {
  id: number;
  content: string;
  special?: boolean;
  [field: string]: unknown;
}

/** `bytes` (a tokenizer.json) with its top-level added_tokens replaced by `edit`'s result. */
export function withAddedTokens(bytes: Buffer, edit: (tokens: AddedToken[]) => AddedToken[]): Buffer {
  const scanner = new JsonScanner(bytes, { invalid: (detail) => new Error(`tokenizer.json: ${detail}`) });
  const spans: Array<{ start: number; end: number }> = [];
  const start = scanner.ws(0);
  const end = scanner.members(start, (member) => {
    if (!scanner.keyIs(member, "added_tokens")) return;
    const valueEnd = scanner.skipValue(member.valueStart);
    spans.push({ start: member.valueStart, end: valueEnd });
    return valueEnd;
  });
  if (scanner.ws(end) !== bytes.length) throw new Error("tokenizer.json: bytes after its object");
  if (spans.length !== 1) throw new Error(`tokenizer.json: ${spans.length} added_tokens members, not one`);
  const [{ start: from, end: to }] = spans as [{ start: number; end: number }];
  const tokens = scanner.parse(from, to);
  if (!Array.isArray(tokens)) throw new Error("tokenizer.json: added_tokens is not a list");
  const edited = Buffer.from(JSON.stringify(edit(tokens as AddedToken[])));
  return Buffer.concat([bytes.subarray(0, from), edited, bytes.subarray(to)]);
}
