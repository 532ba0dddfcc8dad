// Preload for `npm run bench -- --cpu-prof DIR` (Node 20 refuses --cpu-prof in
// NODE_OPTIONS, but accepts --import): starts the V8 profiler through node:inspector and
// writes DIR/<pid>.cpuprofile when the process exits normally (the server's children
// exit through process.exit on SIGTERM). Plain JS so it loads before any TS loader.
// It only observes; it never changes how the process runs.
import { Session } from "node:inspector";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.env.TITO_BENCH_CPU_PROF_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 200 });
  session.post("Profiler.start");
  process.on("exit", () => {
    // An in-thread inspector session answers synchronously, so this completes inside "exit".
    session.post("Profiler.stop", (err, result) => {
      if (err) return;
      mkdirSync(dir, { recursive: true });
      const name =
        process.argv[1]
          ?.split("/")
          .pop()
          ?.replace(/\.[jt]s$/, "") ?? "node";
      writeFileSync(join(dir, `${name}-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
