// The load hook behind test/loader/register.mjs: a `.ts` module is TypeScript stripped to
// JavaScript by esbuild (as tsx does), kept in a cache on disk named by a SHA-1 of the file's
// path and text and of esbuild's version and options, so a process after the first finds
// it there and never loads esbuild. Every other URL goes to Node's own loader, and so does
// resolution: our imports name their `.ts` files.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL("../../", import.meta.url));
const cacheDir = `${root}node_modules/.cache/tito-test-ts`;
const OPTIONS = { loader: "ts", format: "esm", target: "es2022", sourcemap: "inline" };

/** esbuild's version and our options: either changing names other files. */
let salt;
/** esbuild, loaded on the first file not in the cache. */
let esbuild;
let cacheUsable = true;

function transform(path, text) {
  esbuild ??= require("esbuild");
  return esbuild.transformSync(text, { ...OPTIONS, sourcefile: path }).code;
}

function cached(path, text) {
  salt ??= JSON.stringify([JSON.parse(readFileSync(require.resolve("esbuild/package.json"), "utf8")).version, OPTIONS]);
  const name = `${cacheDir}/${createHash("sha1").update(salt).update("\0").update(path).update("\0").update(text).digest("hex")}.js`;
  try {
    return readFileSync(name, "utf8");
  } catch {
    // not there yet
  }
  const code = transform(path, text);
  if (cacheUsable) {
    try {
      mkdirSync(cacheDir, { recursive: true });
      // Whole or not at all: processes that start together may write the same name.
      const temp = `${name}.${process.pid}.tmp`;
      writeFileSync(temp, code);
      renameSync(temp, name);
    } catch {
      cacheUsable = false;
    }
  }
  return code;
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return nextLoad(url, context);
  const path = fileURLToPath(url);
  return { format: "module", source: cached(path, readFileSync(path, "utf8")), shortCircuit: true };
}
