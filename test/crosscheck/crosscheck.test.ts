// The cross-check of every family (issue 39, docs/models.md "The cross-check"): the corpus
// (corpus.json) driven through tito-server's router and a worker (the in-process tree of
// test/helpers/tree.ts) per family, every turn's prompt ids
// compared increment by increment with Python's jinja2 (as transformers sets it up, after
// SGLang's message preparation) and HF's Rust tokenizers (test/crosscheck/harness.ts).
// Families with a real npm tokenizer run on it; the others on their synthetic folders.
// A difference fails with the first differing piece. Needs Debian's python3-jinja2 (.ci/run
// installs it).
import { readFileSync } from "node:fs";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { deepseekFolder } from "../helpers/deepseek-folder.ts";
import { nemotron3Folder, qwen35Folder, qwennextFolder } from "../sessions/families/chatml-folders.ts";
import { glm47Folder, minimaxFolder } from "../sessions/families/glm-minimax-folders.ts";
import { gptossInklingFolder, kimiFolder } from "../sessions/families/kimi-inkling-folders.ts";
import { npmFolder } from "../sessions/fixtures.ts";
import { PythonRenderer } from "./engine-stack.ts";
import { crossCheck, readCorpus, type CrossCheckTarget } from "./harness.ts";

const corpus = readCorpus(readFileSync(new URL("./corpus.json", import.meta.url), "utf8"));

/** Per target: the family it must run as, and whether the tokenizer is a real npm one. */
const TARGETS: Array<{ label: string; real: boolean; target: () => CrossCheckTarget }> = [
  {
    label: "qwen3 (npm qwen3)",
    real: true,
    target: () => ({ label: "qwen3 (npm qwen3)", folder: npmFolder("qwen3"), family: "qwen3" }),
  },
  {
    label: "qwennext (npm qwen3)",
    real: true,
    target: () => ({ label: "qwennext (npm qwen3)", folder: qwennextFolder(), family: "qwennext" }),
  },
  {
    label: "llama3 (npm llama3_1)",
    real: true,
    target: () => ({ label: "llama3 (npm llama3_1)", folder: npmFolder("llama3_1"), family: "llama3" }),
  },
  {
    label: "gemma3 (npm gemma3)",
    real: true,
    target: () => ({ label: "gemma3 (npm gemma3)", folder: npmFolder("gemma3"), family: "gemma3" }),
  },
  {
    label: "default (npm deepseek_v3)",
    real: true,
    target: () => ({ label: "default (npm deepseek_v3)", folder: npmFolder("deepseek_v3"), family: "default" }),
  },
  {
    label: "deepseekv32 (npm deepseek_v3, remapped)",
    real: true,
    target: () => ({
      label: "deepseekv32 (npm deepseek_v3, remapped)",
      folder: deepseekFolder("deepseek_v32"),
      family: "deepseekv32",
    }),
  },
  {
    label: "deepseekv4 (npm deepseek_v3, remapped)",
    real: true,
    target: () => ({
      label: "deepseekv4 (npm deepseek_v3, remapped)",
      folder: deepseekFolder("deepseek_v4"),
      family: "deepseekv4",
    }),
  },
  {
    label: "inkling (npm gptoss, Inkling tokens)",
    real: true,
    target: () => ({
      label: "inkling (npm gptoss, Inkling tokens)",
      folder: gptossInklingFolder(true),
      family: "inkling",
    }),
  },
  {
    label: "qwen35 (synthetic)",
    real: false,
    target: () => ({ label: "qwen35 (synthetic)", folder: qwen35Folder(), family: "qwen35" }),
  },
  {
    label: "nemotron3 (synthetic)",
    real: false,
    target: () => ({ label: "nemotron3 (synthetic)", folder: nemotron3Folder(), family: "nemotron3" }),
  },
  {
    label: "glm47 (synthetic)",
    real: false,
    target: () => ({ label: "glm47 (synthetic)", folder: glm47Folder(), family: "glm47" }),
  },
  {
    label: "kimi25 (synthetic)",
    real: false,
    target: () => ({ label: "kimi25 (synthetic)", folder: kimiFolder({ model: "K2.5" }), family: "kimi25" }),
  },
  {
    label: "kimi26 (synthetic)",
    real: false,
    target: () => ({ label: "kimi26 (synthetic)", folder: kimiFolder({ model: "K2.6" }), family: "kimi26" }),
  },
  {
    label: "minimax_m25 (synthetic)",
    real: false,
    target: () => ({ label: "minimax_m25 (synthetic)", folder: minimaxFolder("MiniMax-M2.5"), family: "minimax_m25" }),
  },
  {
    label: "minimax_m27 (synthetic)",
    real: false,
    target: () => ({ label: "minimax_m27 (synthetic)", folder: minimaxFolder("MiniMax-M2.7"), family: "minimax_m27" }),
  },
];

/** A comma list of label fragments: only those targets run (for a quick look at one family). */
const only = process.env.TITO_CROSSCHECK_ONLY?.split(",");
let python: PythonRenderer;
const totals = { sessions: 0, turns: 0, tokens: 0 };

test.before(() => {
  python = new PythonRenderer();
});
test.after(() => {
  python.close();
  console.log(`cross-check: ${totals.sessions} sessions, ${totals.turns} turns, ${totals.tokens} tokens compared`);
});

for (const { label, target } of TARGETS) {
  if (only && !only.some((part) => label.includes(part))) continue;
  test(`cross-check: ${label}`, async () => {
    const resolved = target();
    const result = await crossCheck(resolved, corpus, python);
    totals.sessions += result.sessions;
    totals.turns += result.turns;
    totals.tokens += result.tokens;
    console.log(
      `${resolved.label}: ${result.sessions} sessions, ${result.turns} turns, ${result.tokens} tokens (${result.pythonRendered} increments rendered by Python, ${result.renumbered} added tokens renumbered by Rust); skipped: ${result.skipped.join("; ") || "none"}`,
    );
    assert.equal(result.failures, [], result.failures[0]);
    assert.ok(result.turns > 0, "something was compared");
  });
}

test.run();
