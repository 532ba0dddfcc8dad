// Runs several test files in one process, as uvu's own CLI does (every file imported, then
// their suites one after another, one summary): test/run.ts's batches of fast-set files
// (test/fast-set.ts), in `npm test` and `npm run test:fast`, where the files share
// one Node start, one tsx, and the tokenizers they load through the test helpers' caches.
//
//   node --import tsx test/batch.ts <file> …
import { relative } from "node:path";
import { pathToFileURL } from "node:url";
import { run } from "uvu/run";

const files = process.argv.slice(2);
// uvu imports 'file:///' + file; a URL's pathname is what that needs on every platform.
await run(files.map((file) => ({ name: relative(process.cwd(), file), file: pathToFileURL(file).pathname })));
