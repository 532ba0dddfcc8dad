// `node --import ./test/loader/register.mjs file.ts`: runs our TypeScript test files and the
// sources they import without tsx. tsx's loader costs each process about 0.2-0.3 CPU s more
// (its resolver runs for every import, node_modules' too); the test run starts ~70 such
// processes. Stack traces point into the .ts files (inline source maps).
import { register } from "node:module";

process.setSourceMapsEnabled(true);
register("./ts-hooks.mjs", import.meta.url);
