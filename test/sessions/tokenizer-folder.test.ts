import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, writeFileSync, copyFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundledQwen3Dir, loadTokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { TokenizerLoadError } from "../../sessions/errors.ts";
import { renderChat } from "../../sessions/chat-template.ts";

const qwen = loadTokenizerFolder(bundledQwen3Dir());

test("bundled Qwen3 folder loads with its special tokens", () => {
  assert.is(qwen.tokenId("<|im_end|>"), 151645);
  assert.ok(qwen.specialTokenIds.has(151645));
  assert.not.ok(qwen.specialTokenIds.has(qwen.tokenId("<think>")!), "<think> is an added, non-special token");
  assert.equal(qwen.encode("\n"), [198]);
  assert.is(qwen.decode(qwen.encode("hi <|im_end|>\n")), "hi <|im_end|>\n");
});

test("a missing file is named in the error", () => {
  const dir = mkdtempSync(join(tmpdir(), "tito-tok-"));
  try {
    assert.throws(() => loadTokenizerFolder(dir), (e: unknown) => e instanceof TokenizerLoadError && /tokenizer\.json/.test((e as Error).message));
    copyFileSync(join(bundledQwen3Dir(), "tokenizer.json"), join(dir, "tokenizer.json"));
    assert.throws(() => loadTokenizerFolder(dir), /tokenizer_config\.json/);
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|im_end|>" }));
    assert.throws(() => loadTokenizerFolder(dir), /chat_template\.jinja/);
    writeFileSync(join(dir, "chat_template.jinja"), "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
    const folder = loadTokenizerFolder(dir);
    assert.is(renderChat(folder, [{ role: "user", content: null }], { addGenerationPrompt: false }), "user:;");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("rendering never mutates the caller's messages", () => {
  const call = { id: "c1", type: "function", function: { name: "f", arguments: '{"x": 1}' } };
  const messages = [{ role: "user", content: "hi" }, { role: "assistant", content: null, tool_calls: [call] }];
  const snapshot = JSON.stringify(messages);
  const text = renderChat(qwen, messages, { addGenerationPrompt: false });
  assert.ok(text.includes('{"name": "f", "arguments": {"x": 1}}'), text);
  assert.is(JSON.stringify(messages), snapshot);
});

test.run();
