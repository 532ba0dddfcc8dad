// Preloaded by test/run.ts into each test file's process: at exit it prints the CPU
// seconds the process and the children it waited for used (user and system time from
// /proc/self/stat: utime, stime, cutime, cstime), so the runner can show each file's
// cost on a busy machine where wall time says little. Linux only; elsewhere it prints
// nothing and the runner shows wall time alone.
import { readFileSync, writeSync } from "node:fs";

/** Clock ticks per second: Linux's USER_HZ is 100 on every architecture Node runs on. */
const TICKS = 100;

process.once("exit", () => {
  let stat: string;
  try {
    stat = readFileSync("/proc/self/stat", "utf8");
  } catch {
    return;
  }
  // Fields after the command name (which may hold spaces) start at field 3 (state).
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]) / TICKS);
  writeSync(2, `\nTITO_CPU user=${(utime! + cutime!).toFixed(2)} sys=${(stime! + cstime!).toFixed(2)}\n`);
});
