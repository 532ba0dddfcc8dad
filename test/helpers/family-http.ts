// A model family end to end over HTTP: the simulated engine on a tokenizer folder (its
// family detected from the folder, as the engine writes replies in that family's format),
// a tito-server tree in this process (test/helpers/tree.ts) with one worker on the same
// loaded folder (its family detected too; the folder is loaded once per process), and a multi-turn loop a client drives: a tool loop where the family can call
// tools, else user turns. `checkFamilyLoop` asserts the TITO contract turn by turn from
// the prompts the engine received. A new case is a folder and the family it must get.
import * as assert from "uvu/assert";
import { selectFamily, type TitoFamilyName } from "../../sessions/families/index.ts";
import { loadTokenizerFolder, type TokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { startSimEngine, type SimEngine } from "../../server/sim-engine/sim-engine.ts";
import type { ChatCompletion, SampleBody, SessionBody, WireMessage } from "./bodies.ts";
import { call, chat, newSession, WEATHER_TOOL } from "./server.ts";
import { startTree, type InProcessTree } from "./tree.ts";

export interface FamilyCase {
  /** The case's name in test titles. */
  label: string;
  /** The tokenizer folder (a path, or made on demand, e.g. a temp folder). */
  dir: string | (() => string);
  /** The family the server and the engine must detect. */
  family: TitoFamilyName;
  /** Drive a tool loop (the family's format carries tool calls and its template tool results). */
  tools: boolean;
  /** The folder already loaded in this process (the engine then skips its own load). */
  folder?: () => TokenizerFolder;
}

export interface FamilyHarness {
  folder: TokenizerFolder;
  engine: SimEngine;
  server: InProcessTree;
  /** The `input_ids` of every chat request the engine received, in order. */
  prompts: number[][];
  close(): Promise<void>;
}

/** Starts the engine and a one-worker tree on the case's folder, loaded once. */
export async function startFamilyHarness(c: FamilyCase): Promise<FamilyHarness> {
  const dir = typeof c.dir === "string" ? c.dir : c.dir();
  const folder = c.folder?.() ?? loadTokenizerFolder(dir);
  const prompts: number[][] = [];
  const engine = await startSimEngine({
    tokenizerFolder: folder,
    beforeReply: (body) => {
      const ids = (body as { input_ids?: unknown }).input_ids;
      if (Array.isArray(ids)) prompts.push(ids as number[]);
    },
  });
  let server: InProcessTree;
  try {
    server = await startTree({ engineUrl: engine.url, tokenizerDir: dir, tokenizerFolder: folder, workers: 1 });
  } catch (err) {
    await engine.close();
    throw err;
  }
  return {
    folder,
    engine,
    server,
    prompts,
    async close() {
      await server.shutdown();
      await engine.close();
    },
  };
}

/** The conversation a client drives: 4 turns of a tool loop, or 3 user turns. */
async function drive(base: string, id: string, withTools: boolean): Promise<ChatCompletion[]> {
  const replies: ChatCompletion[] = [];
  const messages: WireMessage[] = [
    { role: "system", content: "You answer weather questions." },
    { role: "user", content: "What is the weather in Paris?" },
  ];
  const extra = withTools ? { tools: [WEATHER_TOOL] } : {};
  const turn = async () => {
    const { res, message } = await chat(base, id, messages, extra);
    assert.is(res.status, 200, res.text);
    replies.push(res.json);
    messages.push(message!);
    return message!;
  };
  if (withTools) {
    for (const [result, next] of [
      ['{"temp_c": 21}', "And tomorrow?"],
      ["rain", ""],
    ] as const) {
      const called = await turn();
      assert.is(called.tool_calls?.length, 1, `a tool call: ${JSON.stringify(called)}`);
      messages.push({ role: "tool", tool_call_id: called.tool_calls![0]!.id, content: result });
      const answer = await turn();
      assert.not.ok(answer.tool_calls?.length, "after a tool result the model answers in text");
      if (next) messages.push({ role: "user", content: next });
    }
  } else {
    for (const next of ["And tomorrow?", "Thanks."]) {
      await turn();
      messages.push({ role: "user", content: next });
    }
    await turn();
  }
  return replies;
}

const completionOf = (reply: ChatCompletion) => reply.choices[0]!.meta_info.output_token_logprobs.map(([, id]) => id);

/**
 * Drives the loop and asserts: each turn's prompt (as the engine got it) is the previous
 * prompt + completion + the family's boundary ids + the new turn's ids; the sample's ids
 * are the engine's ids; the metadata names the family; drift holds only assistant_text.
 */
export async function checkFamilyLoop(c: FamilyCase, h: FamilyHarness): Promise<void> {
  const base = h.server.url;
  const family = selectFamily(h.folder, c.family);
  const id = await newSession(base);
  const before = h.prompts.length;
  const replies = await drive(base, id, c.tools);
  const prompts = h.prompts.slice(before);
  assert.is(prompts.length, replies.length, "one engine request per turn");
  const completions = replies.map(completionOf);
  const stop = h.folder.tokenId(family.stopTokens[0]!);
  for (let k = 0; k < replies.length; k++) {
    assert.is(completions[k]!.at(-1), stop, `turn ${k} ends with the family's stop token`);
    if (k === 0) continue;
    const checkpoint = [...prompts[k - 1]!, ...completions[k - 1]!];
    const joined = [...checkpoint, ...family.boundaryIds(checkpoint)];
    assert.equal(prompts[k]!.slice(0, joined.length), joined, `turn ${k} extends turn ${k - 1} + boundary`);
    assert.ok(prompts[k]!.length > joined.length, `turn ${k} appends something`);
  }
  const last = [...prompts.at(-1)!, ...completions.at(-1)!];

  const sample = await call<SampleBody>(base, "POST", `/sessions/${id}/samples`);
  assert.is(sample.status, 200, sample.text);
  assert.equal(sample.json.tokens, last, "the sample's ids are the engine's");
  assert.is(sample.json.turns.length, replies.length);
  sample.json.turns.forEach((t, k) =>
    assert.equal(sample.json.tokens.slice(t.completion_start, t.completion_end), completions[k], `turn ${k}`),
  );

  const got = await call<SessionBody>(base, "GET", `/sessions/${id}`);
  assert.is(got.status, 200, got.text);
  assert.is(got.json.metadata.tito_family, c.family);
  assert.equal(got.json.metadata.accumulated_token_ids, last);
  const drift = got.json.metadata.tito_session_mismatch;
  assert.ok(Array.isArray(drift), "a drift report once the session has turns");
  const hard = drift!.filter((m) => m.type !== "assistant_text");
  assert.equal(hard, [], `only assistant_text drift: ${JSON.stringify(hard)}`);
}
