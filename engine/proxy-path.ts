// Checks a proxied path before it is joined to the engine's root: a path whose
// segments, decoded as the engine would decode them (and once more, for double
// encoding), contain `..` would escape the root, and is refused with a 400.
import { ProxyPathError } from "../sessions/errors.ts";

function decodeOnce(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s; // A malformed escape is passed through as text; the engine decides about it.
  }
}

/** Returns the path to append to the engine root ("/" when empty), or throws ProxyPathError. */
export function checkProxyPath(path: string): string {
  const p = path === "" ? "/" : path.startsWith("/") ? path : `/${path}`;
  let decoded = p;
  for (let round = 0; round < 3; round++) {
    // Backslashes count as separators: some servers normalize them to "/".
    if (decoded.split(/[/\\]/).some((segment) => segment === "..")) throw new ProxyPathError(path);
    const next = decodeOnce(decoded);
    if (next === decoded) break;
    decoded = next;
  }
  return p;
}
