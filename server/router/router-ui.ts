// GET /ui: the built-in viewer (docs/viewer.md), a page of static files shipped in the
// package: ui/index.html and ui/viewer.css as they are, and the browser modules tsc compiles
// from ui/*.ts into dist/ui/ with the rest of the server (`npm run build`). Nothing is built
// at run time and nothing is fetched from elsewhere. The page reads the same HTTP API any
// client does; this plugin only serves files, so the router imports nothing of the viewer's.
// The files are read once, when the router builds its app, and answered from memory.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ViewerFileNotFoundError } from "./errors.ts";

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
};

interface Asset {
  type: string;
  bytes: Buffer;
}

/** The viewer's files by URL path: `/ui` (the page) and `/ui/<name>` for each file beside it. */
export type UiAssets = ReadonlyMap<string, Asset>;

/** The package's root: the nearest folder above this file with a package.json (from server/router/ or dist/server/router/). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
  return dir;
}

function filesIn(dir: string, extensions: readonly string[]): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((name) => extensions.includes(extname(name)));
}

/**
 * Reads the viewer's files: the page and its stylesheet from ui/, its modules from dist/ui/.
 * Without a build (a test run from sources) the page has no modules and says so itself.
 */
export function loadUiAssets(root = packageRoot()): UiAssets {
  const assets = new Map<string, Asset>();
  const add = (path: string, file: string) =>
    assets.set(path, { type: CONTENT_TYPES[extname(file)]!, bytes: readFileSync(file) });
  const source = join(root, "ui");
  if (existsSync(join(source, "index.html"))) add("/ui", join(source, "index.html"));
  for (const name of filesIn(source, [".css"])) add(`/ui/${name}`, join(source, name));
  const built = join(root, "dist", "ui");
  for (const name of filesIn(built, [".js"])) add(`/ui/${name}`, join(built, name));
  return assets;
}

export async function uiRoutes(app: FastifyInstance, { assets }: { assets: UiAssets }): Promise<void> {
  const send = (path: string, reply: FastifyReply) => {
    const asset = assets.get(path);
    if (!asset) throw new ViewerFileNotFoundError(path);
    // Revalidated on every load: a server upgrade must not leave the page on old modules.
    return reply.header("content-type", asset.type).header("cache-control", "no-cache").send(asset.bytes);
  };
  app.get("/ui", (_request, reply) => send("/ui", reply));
  app.get("/ui/:file", (request: FastifyRequest<{ Params: { file: string } }>, reply) =>
    send(`/ui/${request.params.file}`, reply),
  );
}
