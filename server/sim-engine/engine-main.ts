// Standalone CLI for the simulated engine (`npm run engine -- --port P`): the flags and
// the serving loop are engine-cli.ts's.
import { parseEngineArgs, serveEngine } from "./engine-cli.ts";

await serveEngine(parseEngineArgs(process.argv.slice(2)));
