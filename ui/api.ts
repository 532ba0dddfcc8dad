// The viewer's HTTP client: the same API any client uses (docs/http.md), at URLs relative
// to the page, with the admin token from this tab's session storage when there is one.
// The token is never written anywhere else (no localStorage, no cookie, no URL).

const TOKEN_KEY = "tito-admin-token";

/** A reply that was not 2xx, with the server's `{"error"}` message. */
export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export const adminToken = (): string | null => sessionStorage.getItem(TOKEN_KEY);
export const setAdminToken = (token: string): void => sessionStorage.setItem(TOKEN_KEY, token);
export const forgetAdminToken = (): void => sessionStorage.removeItem(TOKEN_KEY);

/** The server's root: the folder of the page's URL (`/ui` → `/`). */
const base = () => new URL(".", location.href);

export async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = adminToken();
  if (token) headers.set("authorization", `Bearer ${token}`);
  const res = await fetch(new URL(path, base()), { ...init, headers });
  if (res.ok) return res;
  const text = await res.text();
  let message = text;
  try {
    message = (JSON.parse(text) as { error?: string }).error ?? text;
  } catch {
    // Not JSON: the text as it is.
  }
  throw new HttpError(res.status, `${init.method ?? "GET"} /${path}: ${res.status} ${message}`);
}

export async function getJson<T>(path: string, init?: RequestInit): Promise<T> {
  return (await request(path, init)).json() as Promise<T>;
}

/** A POST with a JSON body. */
export const postJson = <T>(path: string, body: unknown): Promise<T> =>
  getJson<T>(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
