// DeepSeek V3.2 through the session core and the sglang-chat adapter: a real checkpoint's
// folder ships no chat template (the model uses an encoder), and the server must start on
// it; the engine gets the effective `thinking` flag SGLang's deepseek-v3 reasoning parser
// needs, beside the pinned drop_thinking. A family that needs the folder's template
// refuses to start without one.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { TokenizerLoadError } from "../../../sessions/errors.ts";
import { loadTokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import type { CoreResponse, SessionCore } from "../../../sessions/index.ts";
import { startSimEngine, type SimEngine } from "../../../server/sim-engine/sim-engine.ts";
import { coreFor } from "../../helpers/core.ts";
import { remappedDeepseekDir } from "../../helpers/deepseek-folder.ts";

/** The remapped V3.2 folder without its V3 chat template, as a real V3.2 checkpoint ships it. */
function templateLessDir(): string {
  const dir = remappedDeepseekDir("deepseek_v32");
  const configPath = join(dir, "tokenizer_config.json");
  const config = JSON.parse(readFileSync(configPath, "utf8")) as Record<string, unknown>;
  delete config.chat_template;
  writeFileSync(configPath, JSON.stringify(config));
  return dir;
}

const folder = loadTokenizerFolder(templateLessDir());
let engine: SimEngine;
let core: SessionCore;
const seen: Array<Record<string, unknown>> = [];
const json = (r: CoreResponse) =>
  JSON.parse((Array.isArray(r.body) ? Buffer.concat(r.body) : (r.body as Buffer)).toString("utf8"));
const chatReq = (body: unknown) => ({
  method: "POST",
  path: "/v1/chat/completions",
  query: "",
  headers: { "content-type": "application/json" },
  body: Buffer.from(JSON.stringify(body)),
});

test.before(async () => {
  engine = await startSimEngine({
    tokenizerFolder: folder,
    beforeReply: (body) => void seen.push(body as Record<string, unknown>),
  });
  core = coreFor({ engineUrl: engine.url, tokenizerFolder: folder });
});

test.after(async () => {
  await core?.close();
  await engine?.close();
});

test("a template-less V3.2 folder: the core starts as deepseekv32 and renders with its encoder", async () => {
  assert.is(folder.chatTemplate, "");
  assert.is(core.familyName, "deepseekv32");
  const id = json(await core.create()).session_id;
  const res = await core.chat(id, chatReq({ messages: [{ role: "user", content: "hi" }] }));
  assert.is(res.status, 200, JSON.stringify(json(res)));
  const prompt = folder.decode(seen[0]!.input_ids as number[]);
  assert.ok(prompt.startsWith("<｜begin▁of▁sentence｜>"), prompt);
  assert.ok(prompt.endsWith("<｜User｜>hi<｜Assistant｜><think>"), prompt);
});

test("the engine gets the effective thinking flag with the pinned drop_thinking", async () => {
  const id = json(await core.create()).session_id;
  seen.length = 0;
  await core.chat(id, chatReq({ messages: [{ role: "user", content: "a" }] }));
  assert.equal(seen[0]!.chat_template_kwargs, { drop_thinking: false, thinking: true });
  const other = json(await core.create()).session_id;
  await core.chat(
    other,
    chatReq({ messages: [{ role: "user", content: "b" }], chat_template_kwargs: { enable_thinking: false } }),
  );
  assert.equal(seen[1]!.chat_template_kwargs, { drop_thinking: false, enable_thinking: false, thinking: false });
  assert.ok(folder.decode(seen[1]!.input_ids as number[]).endsWith("<｜Assistant｜></think>"));
});

test("a family that renders with the folder's template refuses a folder without one", () => {
  assert.throws(
    () => coreFor({ engineUrl: engine.url, tokenizerFolder: folder, titoFamily: "default" }),
    (e: unknown) => e instanceof TokenizerLoadError && /has no chat template/.test((e as Error).message),
  );
});

test.run();
