// Which code a benchmark measured, for the line every benchmark prints next to its
// results: the commit, and whether the tree had uncommitted changes.
import { execFileSync } from "node:child_process";
import { REPO_ROOT } from "./rollout-procs.ts";

export function gitState(): { commit: string; uncommittedChanges: boolean } | Record<string, never> {
  try {
    const git = (...args: string[]) =>
      execFileSync("git", args, { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    return {
      commit: git("rev-parse", "--short", "HEAD"),
      uncommittedChanges: git("status", "--porcelain", "--untracked-files=no") !== "",
    };
  } catch {
    return {}; // not a git checkout (e.g. an exported snapshot)
  }
}

/** ", code <commit>[ + uncommitted changes]", or "" outside a git checkout. */
export function codeNote(git: ReturnType<typeof gitState>): string {
  return "commit" in git ? `, code ${git.commit}${git.uncommittedChanges ? " + uncommitted changes" : ""}` : "";
}
