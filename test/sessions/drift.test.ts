import { test } from "uvu";
import * as assert from "uvu/assert";
import { renderChat, type ChatMessage } from "../../sessions/chat-template.ts";
import { compareTrajectories } from "../../sessions/drift.ts";
import { selectFamily } from "../../sessions/families/index.ts";
import { qwen3 } from "./fixtures.ts";

const folder = qwen3();
const family = selectFamily(folder);
const NL = folder.encode("\n")[0]!;
const encode = (messages: ChatMessage[]) => folder.encode(renderChat(folder, messages, { addGenerationPrompt: false }));
const convo: ChatMessage[] = [
  { role: "system", content: "sys" },
  { role: "user", content: "hello" },
  { role: "assistant", content: "Hi there." },
];

test("identical ids report nothing; trailing newlines are stripped from both tails", () => {
  const ids = encode(convo);
  assert.equal(compareTrajectories(folder, family, ids, ids), []);
  assert.is(ids[ids.length - 1], NL);
  assert.equal(compareTrajectories(folder, family, ids, ids.slice(0, -1)), []);
  assert.equal(compareTrajectories(folder, family, [...ids, NL], ids.slice(0, -1)), []);
});

test("different assistant text is assistant_text; different user text is non_assistant_text", () => {
  const expected = encode(convo);
  const assistantDrift = compareTrajectories(
    folder,
    family,
    expected,
    encode([...convo.slice(0, 2), { role: "assistant", content: "Hi  there." }]),
  );
  assert.is(assistantDrift.length, 1);
  assert.is(assistantDrift[0]!.type, "assistant_text");
  assert.match(assistantDrift[0]!.expected_text, "Hi there.");
  assert.match(assistantDrift[0]!.actual_text, "Hi  there.");
  const userDrift = compareTrajectories(
    folder,
    family,
    expected,
    encode([convo[0]!, { role: "user", content: "hell o" }, convo[2]!]),
  );
  assert.equal(
    userDrift.map((m) => m.type),
    ["non_assistant_text"],
  );
  assert.ok(userDrift[0]!.segment_index > 0);
});

test("a missing or different special token is reported as such", () => {
  const expected = encode(convo);
  const imEnd = folder.tokenId("<|im_end|>")!;
  const firstEnd = expected.indexOf(imEnd);
  const missing = [...expected.slice(0, firstEnd), ...expected.slice(firstEnd + 1)];
  const count = compareTrajectories(folder, family, expected, missing);
  // Located (issue 39): the first segment where the kinds differ, its text on both sides.
  const at = expected
    .slice(0, firstEnd)
    .reduce(
      (n, id, i) =>
        i === 0 || folder.specialTokenIds.has(id) || folder.specialTokenIds.has(expected[i - 1]!) ? n + 1 : n,
      0,
    );
  assert.equal(
    count.map((m) => [m.type, m.segment_index, m.expected_text]),
    [["special_token_count", at, "<|im_end|>"]],
  );
  const swapped = [...expected];
  swapped[firstEnd] = folder.tokenId("<|endoftext|>")!;
  assert.equal(
    compareTrajectories(folder, family, expected, swapped).map((m) => m.type),
    ["special_token_type"],
  );
});

test.run();
