import { test } from "uvu";
import * as assert from "uvu/assert";
import { Tokenizer } from "@huggingface/tokenizers";
import { cachedEncoder, fastSplit } from "../../sessions/cached-encode.ts";
import { qwen3 } from "./fixtures.ts";

const folder = qwen3();
const reference = (text: string) => folder.tokenizer.encode(text, { add_special_tokens: false } as never).ids;
const encode = cachedEncoder(folder.tokenizer)!;

test("the Qwen3 tokenizer gets the cached encoder, and the folder uses it", () => {
  assert.type(encode, "function");
  assert.equal(folder.encode("hello world"), reference("hello world"));
});

test("the same ids as the library on edge cases: added tokens, whitespace runs, contractions, unicode", () => {
  const cases = [
    "",
    " ",
    "\n\n\n",
    "a\r\n\r\nb",
    "   leading and trailing   ",
    "It's, I'LL, we'Ve",
    '<|im_start|>user\n<tool_response>\n{"ok": true}\n</tool_response><|im_end|>\n',
    "<|im_start|><|im_end|><think>\n\n</think>\n\n",
    "x<tool_call>y</tool_call>z",
    "café cafe\u0301 ß İ ǅ",
    "中文字符 和 emoji 🙂🙂 \u200b\u00a0",
    "12345678901234567890 3.14159",
    "a".repeat(600) + " " + "\t".repeat(300),
  ];
  for (const text of cases) assert.equal(encode(text), reference(text), JSON.stringify(text));
});

test("the same ids as the library on 5000 random strings, and again once every piece is cached", () => {
  const parts = [
    "a",
    "Z",
    " ",
    "  ",
    "\n",
    "\r\n",
    "\t",
    "'s",
    "'S",
    "1",
    "23",
    "é",
    "e\u0301",
    "中",
    "🙂",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_response>",
    ".",
    "!!",
    '{"x": 1}',
    "\u00a0",
  ];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const texts: string[] = [];
  for (let i = 0; i < 5000; i++) {
    let s = "";
    const n = Math.floor(next() * 24);
    for (let j = 0; j < n; j++)
      s +=
        next() < 0.3 ? String.fromCodePoint(1 + Math.floor(next() * 0x3000)) : parts[Math.floor(next() * parts.length)];
    texts.push(s);
  }
  for (const round of [1, 2]) {
    for (const text of texts) assert.equal(encode(text), reference(text), `round ${round}: ${JSON.stringify(text)}`);
  }
});

test("a caller changing a returned list does not change later results", () => {
  const first = encode("the same words the same words");
  const expected = [...first];
  first.fill(0);
  assert.equal(encode("the same words the same words"), expected);
});

test("a tokenizer of another shape gets no fast path", () => {
  const wordLevel = new Tokenizer(
    {
      version: "1.0",
      added_tokens: [],
      normalizer: null,
      pre_tokenizer: { type: "Whitespace" },
      post_processor: null,
      decoder: null,
      model: { type: "WordLevel", vocab: { "[UNK]": 0, hello: 1 }, unk_token: "[UNK]" },
    } as never,
    {} as never,
  );
  assert.is(cachedEncoder(wordLevel), undefined);
});

test("the added-token split as a regex cuts exactly where the library's trie does", () => {
  // Words that are prefixes of each other, share prefixes, and hold regex syntax.
  const words = ["<a>", "<a>b", "<a", "a.b", "[x]", "(y)*", "\\d+", "|", "$^", "ab", "abc", "bc", "🙂x"];
  const tokenizer = new Tokenizer(
    {
      version: "1.0",
      added_tokens: words.map((content, i) => ({
        id: 10 + i,
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
      normalizer: null,
      pre_tokenizer: { type: "Whitespace" },
      post_processor: null,
      decoder: null,
      model: { type: "WordLevel", vocab: { "[UNK]": 0 }, unk_token: "[UNK]" },
    } as never,
    {} as never,
  );
  const splitter = (tokenizer as unknown as { splitter_unnormalized: { split(t: string): string[] } })
    .splitter_unnormalized;
  const split = fastSplit(splitter);
  const parts = [...words, "a", "b", "c", "<", ">", ".", "x", "🙂", " ", "\\", "d"];
  let seed = 11;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let i = 0; i < 3000; i++) {
    let s = "";
    const n = Math.floor(next() * 16);
    for (let j = 0; j < n; j++) s += parts[Math.floor(next() * parts.length)];
    assert.equal(split(s), splitter.split(s), JSON.stringify(s));
  }
  assert.equal(split("<a>bc"), ["<a>b", "c"]);
  assert.equal(split("xabcx"), ["x", "abc", "x"]);
  assert.equal(split(""), []);
  // The Qwen3 splitters too.
  const qwen = folder.tokenizer as unknown as { splitter_unnormalized: { split(t: string): string[] } };
  const text = "<|im_start|>user\n<tool_response>\nok</tool_response><|im_end|>\n<think>\n\n</think>";
  assert.equal(fastSplit(qwen.splitter_unnormalized)(text), qwen.splitter_unnormalized.split(text));
});

test.run();
