// The benchmarks' /proc readings of a process's memory and page faults: PSS against RSS,
// and minor faults counted from the right field of /proc/<pid>/stat.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpuDelta, cpuSnapshot, pssMiB, rssMiB, RssSampler } from "../../bench/rollout-proc-stats.ts";

test("a fresh buffer's first touch shows as minor page faults of that process", () => {
  const pids = { self: process.pid };
  const before = cpuSnapshot(pids);
  // 16 MiB from mmap (above malloc's threshold), every page written once: ~4096 faults.
  const fresh = Buffer.alloc(16 * 1024 * 1024, 1);
  const after = cpuSnapshot(pids);
  const faults = cpuDelta(before, after, "minorFaults").self!;
  assert.ok(fresh[fresh.length - 1] === 1);
  // Transparent huge pages could map it in fewer, larger faults; never in none.
  assert.ok(faults >= 8, `faults ${faults}`);
  assert.ok(faults < 1_000_000, `faults ${faults}`);
});

test("PSS is at most RSS, and a second process sharing node's code makes each one's PSS smaller", async () => {
  const alone = pssMiB(process.pid);
  const rss = rssMiB(process.pid);
  assert.ok(Number.isFinite(alone) && alone > 0, `pss ${alone}`);
  assert.ok(alone <= rss + 0.5, `pss ${alone} rss ${rss}`);

  // A child running the same node binary maps the same code pages: they are then shared by
  // two processes, each PSS counts half of them, and the two PSS sum to less than the RSS.
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000); process.stdout.write('up')"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    await once(child.stdout!, "data");
    const pids = { self: process.pid, child: child.pid! };
    const sampler = new RssSampler(pids, Object.keys(pids), 50, 1);
    const peaks = sampler.stop();
    const childRss = rssMiB(child.pid!);
    const childPss = pssMiB(child.pid!);
    assert.ok(childPss < childRss, `child pss ${childPss} rss ${childRss}`);
    assert.ok(peaks.groupPss > 0 && peaks.groupPss < peaks.group, `group pss ${peaks.groupPss} rss ${peaks.group}`);
  } finally {
    child.kill();
  }
});

test("PSS of a process that is gone is NaN, not 0", () => {
  assert.ok(Number.isNaN(pssMiB(2 ** 22 + 12345)));
});

test.run();
