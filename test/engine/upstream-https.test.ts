// An https engine goes through the same engine client as http. Against a local https server
// with a self-signed certificate (test/fixtures/tls-selfsigned.*): untrusted, the call is
// a 502 naming the certificate problem; trusted through NODE_EXTRA_CA_CERTS (in a child
// process, since Node reads that variable at startup), the reply comes back whole.
import { test } from "uvu";
import * as assert from "uvu/assert";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import { fileURLToPath } from "node:url";
import { createUpstream } from "../../engine/upstream.ts";
import { TS_LOADER } from "../helpers/ts-loader.ts";

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));
let server: Server;
let url: string;
let seen: { url: string; body: string }[] = [];

test.before(async () => {
  server = createServer(
    { key: readFileSync(fixture("tls-selfsigned.key")), cert: readFileSync(fixture("tls-selfsigned.crt")) },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        seen.push({ url: req.url!, body: Buffer.concat(chunks).toString() });
        res.writeHead(200, { "content-type": "application/json", connection: "keep-alive" });
        res.end(JSON.stringify({ ok: true, got: Buffer.concat(chunks).toString() }));
      });
    },
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `https://127.0.0.1:${(server.address() as { port: number }).port}/root`;
});
test.after(() => new Promise<void>((r) => server.close(() => r())));

test("an untrusted certificate is a 502 that says so", async () => {
  const upstream = createUpstream(url, { timeoutMs: 5_000 });
  const err = await upstream
    .send({
      method: "POST",
      path: "/v1/chat/completions",
      headers: { "content-type": "application/json" },
      body: Buffer.from("{}"),
    })
    .catch((e) => e);
  await upstream.close();
  assert.is(err.status, 502);
  assert.match(err.message, /engine .*https:\/\/127\.0\.0\.1:\d+\/root.*(self-signed|certificate)/i);
});

test("an https engine trusted through NODE_EXTRA_CA_CERTS answers", async () => {
  seen = [];
  const script = `
    import { createUpstream } from ${JSON.stringify(fileURLToPath(new URL("../../engine/upstream.ts", import.meta.url)))};
    const u = createUpstream(${JSON.stringify(url)}, { timeoutMs: 5000 });
    const r = await u.send({ method: "POST", path: "/v1/x", headers: { "content-type": "application/json" }, body: Buffer.from('{"q":1}') });
    process.stdout.write(JSON.stringify({ status: r.status, type: r.headers["content-type"], connection: r.headers.connection ?? null, body: Buffer.concat(r.body).toString() }));
    await u.close();`;
  const out = await new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      [...TS_LOADER, "--input-type=module", "-e", script],
      { env: { ...process.env, NODE_EXTRA_CA_CERTS: fixture("tls-selfsigned.crt") } },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
    ),
  );
  const r = JSON.parse(out);
  assert.equal(r, { status: 200, type: "application/json", connection: null, body: '{"ok":true,"got":"{\\"q\\":1}"}' });
  assert.equal(seen, [{ url: "/root/v1/x", body: '{"q":1}' }]);
});

test.run();
