// The host's own HTTP calls (pause, resume, session helpers) wait as long as the router
// takes: Node 20's global agent would otherwise cut a call quiet for 5 s.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { httpText } from "../../server/host/http-text.ts";

function slowServer(delayMs: number) {
  const srv = createServer((_req, res) => {
    setTimeout(() => res.end("late but whole"), delayMs);
  });
  return new Promise<{ url: string; close: () => void }>((resolve) =>
    srv.listen(0, "127.0.0.1", () =>
      resolve({ url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, close: () => srv.close() }),
    ),
  );
}

test("a call with no timeout outlives the global agent's 5 s idle timeout", async () => {
  const srv = await slowServer(5_600);
  try {
    const res = await httpText(`${srv.url}/admin/pause`, { method: "POST" });
    assert.equal([res.status, res.text], [200, "late but whole"]);
  } finally {
    srv.close();
  }
});

test("an explicit timeout still cuts, and says how long it waited", async () => {
  const srv = await slowServer(2_000);
  try {
    const err = await httpText(`${srv.url}/health`, { timeoutMs: 200 }).then(
      () => undefined,
      (e: Error) => e,
    );
    assert.ok(err, "the call failed");
    assert.match(err.message, /within 200 ms/);
  } finally {
    srv.close();
  }
});

test.run();
