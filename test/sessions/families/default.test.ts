// The default family on DeepSeek V3's npm tokenizer (V3 has no registered family): its
// role tokens are added without the special flag, yet drift must split at them, and text
// after `<｜Assistant｜>` is assistant text (soft), text after `<｜User｜>` is not (hard).
import { test } from "uvu";
import * as assert from "uvu/assert";
import { renderChat } from "../../../sessions/chat-template.ts";
import { compareTrajectories } from "../../../sessions/drift.ts";
import { selectFamily } from "../../../sessions/families/index.ts";
import { npmFolder } from "../fixtures.ts";

const folder = npmFolder("deepseek_v3");
const family = selectFamily(folder);
const messages = [
  { role: "user", content: "hi" },
  { role: "assistant", content: "Hello world" },
];
const expected = folder.encode(renderChat(folder, messages, { addGenerationPrompt: false }));

test("plain V3 is default, with its role tokens splitting drift segments", () => {
  assert.is(family.name, "default");
  assert.ok(family.driftSpecialIds!.has(folder.tokenId("<｜Assistant｜>")!));
  assert.ok(family.driftSpecialIds!.has(folder.tokenId("<｜User｜>")!));
});

test("changed assistant text is assistant_text; changed user text is non_assistant_text", () => {
  const assistantEdit = [{ ...messages[0]! }, { role: "assistant", content: "Hello there" }];
  const actualA = folder.encode(renderChat(folder, assistantEdit, { addGenerationPrompt: false }));
  assert.equal(
    compareTrajectories(folder, family, expected, actualA).map((m) => m.type),
    ["assistant_text"],
  );
  const userEdit = [{ role: "user", content: "hey" }, { ...messages[1]! }];
  const actualU = folder.encode(renderChat(folder, userEdit, { addGenerationPrompt: false }));
  assert.equal(
    compareTrajectories(folder, family, expected, actualU).map((m) => m.type),
    ["non_assistant_text"],
  );
});

test.run();
