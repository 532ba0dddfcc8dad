// The cross-check on any corpus and tokenizer folder, for an independent check (issue 39):
//   npx tsx test/crosscheck/run.ts --corpus my-corpus.json --dir /path/to/tokenizer [--family NAME]
// The corpus is a JSON list of conversations in corpus.json's format (harness.ts,
// `Conversation`); it is read keeping numbers and key order as Python reads them. Prints
// the counts and every difference (first differing piece each); exits 1 when any.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { isFamilyName } from "../../sessions/families/index.ts";
import { loadTokenizerFolder } from "../../sessions/tokenizer-folder.ts";
import { crossCheck, readCorpus } from "./harness.ts";

const { values } = parseArgs({
  options: { corpus: { type: "string" }, dir: { type: "string" }, family: { type: "string" } },
});
if (values.corpus === undefined || values.dir === undefined) {
  console.error("usage: tsx test/crosscheck/run.ts --corpus FILE --dir TOKENIZER_DIR [--family NAME]");
  process.exit(2);
}
if (values.family !== undefined && !isFamilyName(values.family)) {
  console.error(`unknown family ${values.family}`);
  process.exit(2);
}
const corpus = readCorpus(readFileSync(values.corpus, "utf8"));
const folder = loadTokenizerFolder(values.dir);
const result = await crossCheck({ label: values.dir, folder, family: values.family }, corpus);
console.log(
  `${result.sessions} sessions, ${result.turns} turns, ${result.tokens} tokens compared ` +
    `(${result.pythonRendered} increments rendered by Python); skipped: ${result.skipped.join("; ") || "none"}`,
);
for (const failure of result.failures) console.log(`DIFFERENCE ${failure}`);
process.exit(result.failures.length > 0 ? 1 : 0);
