#!/usr/bin/env node
// The `tito-server` command. Runs the compiled CLI in dist/ (`npm run build`; `npm ci` and
// `npm install` build it through the `prepare` script), so no process of the server loads a
// TypeScript loader. Without a build (a source checkout never built) it falls back to the
// TypeScript sources through tsx's loader.
import { existsSync } from "node:fs";

const compiled = new URL("../dist/server/host/cli.js", import.meta.url);
let main;
if (existsSync(compiled)) {
  ({ main } = await import(compiled.href));
} else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ main } = await import("../server/host/cli.ts"));
}
process.exit(await main(process.argv.slice(2)));
