// The Node flags that run a TypeScript entry in a child process the way the test run runs
// its files (test/loader/register.mjs: esbuild with a disk cache, not tsx's loader).
export const TS_LOADER_URL = new URL("../loader/register.mjs", import.meta.url).href;
export const TS_LOADER: readonly string[] = ["--import", TS_LOADER_URL];
