// The load hook behind test/loader/register.mjs: a `.ts` module is TypeScript stripped to
// JavaScript by esbuild (as tsx does), kept in a cache on disk, so a process after the first
// finds it there and never loads esbuild. One file per source path (named by a SHA-1 of the
// path and of esbuild's version and options), whose first line is the SHA-1 of the text it
// was made from: an edited source is transformed again and its file overwritten, so the
// cache holds one file per source, however often they change. Every other URL goes to
// Node's own loader, and so does resolution: our imports name their `.ts` files.
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

const sha1 = (...parts) => {
  const hash = createHash("sha1");
  for (const part of parts) hash.update(part).update("\0");
  return hash.digest("hex");
};

function cached(path, text) {
  salt ??= JSON.stringify([JSON.parse(readFileSync(require.resolve("esbuild/package.json"), "utf8")).version, OPTIONS]);
  const name = `${cacheDir}/${sha1(salt, path)}.js`;
  const stamp = `// ${sha1(text)}\n`;
  try {
    const kept = readFileSync(name, "utf8");
    if (kept.startsWith(stamp)) return kept.slice(stamp.length);
  } catch {
    // not there yet
  }
  const code = transform(path, text);
  if (cacheUsable) {
    try {
      mkdirSync(cacheDir, { recursive: true });
      // Whole or not at all: processes that start together may write the same name.
      const temp = `${name}.${process.pid}.tmp`;
      writeFileSync(temp, stamp + code);
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
