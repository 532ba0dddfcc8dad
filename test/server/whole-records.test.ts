// A records body the router relays goes back from the worker whole when it is small
// (server/worker/worker-handler.ts, wholeRecords): one buffer with the exact bytes of the
// journal stream, its pinned segments released; a stream that reads short is an error,
// never a short body; a bigger body stays a stream, unread.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RecordStream } from "../../sessions/index.ts";
import { WHOLE_RECORDS_BYTES, wholeRecords } from "../../server/worker/worker-handler.ts";

const dir = mkdtempSync(join(tmpdir(), "tito-whole-records-"));
const path = join(dir, "segment");
writeFileSync(path, "0123456789abcdefghij");

test.after(() => rmSync(dir, { recursive: true, force: true }));

const headers = { "content-type": "application/json" };

test("a small journal stream comes back as one buffer of its exact bytes, its segment released", async () => {
  const fh = await open(path, "r");
  try {
    let released = 0;
    const segment = { path, fh };
    const stream = new RecordStream(
      [
        Buffer.from("{"),
        { segment, position: 2, length: 5 },
        Buffer.alloc(0),
        { segment, position: 15, length: 5 },
        Buffer.from("}"),
      ],
      () => released++,
    );
    const res = await wholeRecords({ status: 200, headers, body: stream });
    assert.ok(Buffer.isBuffer(res.body), "one buffer");
    assert.is((res.body as Buffer).toString("latin1"), "{23456fghij}");
    assert.is(res.status, 200);
    assert.equal(res.headers, headers);
    assert.is(released, 1, "the stream's pin is released once");
  } finally {
    await fh.close();
  }
});

test("a stream that reads short rejects: never a short body", async () => {
  const fh = await open(path, "r");
  try {
    let released = 0;
    const stream = new RecordStream(
      [Buffer.from("["), { segment: { path, fh }, position: 15, length: 10 }],
      () => released++,
    );
    await wholeRecords({ status: 200, headers, body: stream }).then(
      () => assert.unreachable("a body past the file's end must fail"),
      (err: Error) => assert.match(err.message, /ended at 20, inside a record/),
    );
    assert.is(released, 1);
  } finally {
    await fh.close();
  }
});

test("a body over the limit, and a body that is not a journal stream, are returned as they are", async () => {
  let released = 0;
  const big = new RecordStream([Buffer.alloc(WHOLE_RECORDS_BYTES + 1)], () => released++);
  const res = { status: 200, headers, body: big };
  assert.is(await wholeRecords(res), res, "the same response, its stream unread");
  assert.is(released, 0);
  for await (const _ of big); // the relay reads it as a stream
  assert.is(released, 1);
  const buffers = { status: 200, headers, body: [Buffer.from("a"), Buffer.from("b")] };
  assert.is(await wholeRecords(buffers), buffers);
});

test.run();
