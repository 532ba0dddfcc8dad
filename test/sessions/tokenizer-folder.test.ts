import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, writeFileSync, copyFileSync, rmSync, readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundledQwen3Dir, loadTokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { TokenizerLoadError } from "../../sessions/errors.ts";
import { renderChat } from "../../sessions/chat-template.ts";
import { qwen3 } from "./fixtures.ts";

const qwen = qwen3();

test("bundled Qwen3 folder loads with its special tokens", () => {
  assert.is(qwen.tokenId("<|im_end|>"), 151645);
  assert.ok(qwen.specialTokenIds.has(151645));
  assert.not.ok(qwen.specialTokenIds.has(qwen.tokenId("<think>")!), "<think> is an added, non-special token");
  assert.equal(qwen.encode("\n"), [198]);
  assert.is(qwen.decode(qwen.encode("hi <|im_end|>\n")), "hi <|im_end|>\n");
});

test("vocabulary ids by text come from the model after its construction input is let go", () => {
  const model = (
    qwen.tokenizer as unknown as {
      model: { config: Record<string, unknown>; merges: unknown[]; tokens_to_ids: Map<string, number> };
    }
  ).model;
  assert.not.ok("vocab" in model.config, "the vocab object is not kept twice");
  assert.is(model.merges.length, 0, "the merge list is not kept besides the ranks");
  assert.is(qwen.tokenId("\u010a"), 198, "a plain vocabulary token (ByteLevel newline)");
  assert.is(qwen.tokenId("constructor"), model.tokens_to_ids.get("constructor"));
  assert.is(qwen.tokenId("no such token \u0000"), undefined);
  // The merges still apply by rank: the same ids as a library tokenizer that keeps everything.
  const dir = bundledQwen3Dir();
  const read = (f: string) => JSON.parse(readFileSync(join(dir, f), "utf8"));
  const full = new Tokenizer(read("tokenizer.json"), read("tokenizer_config.json"));
  for (const text of ["antidisestablishmentarianism", "Grüße, 世界! x=42;\n\tdone", "  spaced   out  "]) {
    assert.equal(qwen.encode(text), full.encode(text, { add_special_tokens: false }).ids, text);
  }
});

test("a missing file is named in the error", () => {
  const dir = mkdtempSync(join(tmpdir(), "tito-tok-"));
  try {
    assert.throws(
      () => loadTokenizerFolder(dir),
      (e: unknown) => e instanceof TokenizerLoadError && /tokenizer\.json/.test((e as Error).message),
    );
    copyFileSync(join(bundledQwen3Dir(), "tokenizer.json"), join(dir, "tokenizer.json"));
    assert.throws(() => loadTokenizerFolder(dir), /tokenizer_config\.json/);
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|im_end|>" }));
    // No template loads (DeepSeek V3.2/V4 ship an encoder), but rendering with it names what is missing.
    const bare = loadTokenizerFolder(dir);
    assert.is(bare.chatTemplate, "");
    assert.throws(
      () => renderChat(bare, [{ role: "user", content: "x" }], { addGenerationPrompt: false }),
      /chat_template\.jinja/,
    );
    writeFileSync(join(dir, "chat_template.jinja"), "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
    const folder = loadTokenizerFolder(dir);
    assert.is(renderChat(folder, [{ role: "user", content: null }], { addGenerationPrompt: false }), "user:;");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("rendering never mutates the caller's messages", () => {
  const call = { id: "c1", type: "function", function: { name: "f", arguments: '{"x": 1}' } };
  const messages = [
    { role: "user", content: "hi" },
    { role: "assistant", content: null, tool_calls: [call] },
  ];
  const snapshot = JSON.stringify(messages);
  const text = renderChat(qwen, messages, { addGenerationPrompt: false });
  assert.ok(text.includes('{"name": "f", "arguments": {"x": 1}}'), text);
  assert.is(JSON.stringify(messages), snapshot);
});

test.run();
