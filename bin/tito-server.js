#!/usr/bin/env node
// The `tito-server` command: runs the TypeScript CLI through tsx's loader.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../server/cli.ts");
process.exit(await main(process.argv.slice(2)));
