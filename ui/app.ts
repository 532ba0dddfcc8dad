// The viewer's entry module (docs/viewer.md): a hash router over four views (sessions list,
// one session, supervision, rollout), the admin-token prompt (only when the server answers
// 401; the token stays in this tab's session storage), and one error banner that shows every
// failure: a request that failed, or a bug in the page. Nothing fails silently.
import { adminToken, forgetAdminToken, getJson, HttpError, setAdminToken } from "./api.ts";
import { rolloutView } from "./rollout-view.ts";
import { sessionView } from "./session-view.ts";
import { sessionsView } from "./sessions-view.ts";
import { supervisionView } from "./supervision-view.ts";

const byId = (id: string) => document.getElementById(id)!;
const main = byId("main");
const banner = byId("error");
const login = byId("login") as HTMLFormElement;
const tokenInput = byId("token-input") as HTMLInputElement;
const forget = byId("forget-token");
const tip = byId("tip");

/** Stops the open view's timers and observers. */
let closeView: (() => void) | void = undefined;

function showError(err: unknown): void {
  if (err instanceof HttpError && err.status === 401) return askForToken();
  banner.textContent = err instanceof Error ? err.message : String(err);
  banner.hidden = false;
}

function askForToken(): void {
  forgetAdminToken();
  forget.hidden = true;
  main.replaceChildren();
  login.hidden = false;
  tokenInput.focus();
}

async function show(): Promise<void> {
  closeView?.();
  closeView = undefined;
  banner.hidden = true;
  banner.textContent = "";
  tip.hidden = true;
  const [, view = "sessions", param = ""] = /^#\/([^/]*)\/?(.*)$/.exec(location.hash) ?? [];
  for (const a of document.querySelectorAll<HTMLElement>("nav a"))
    a.classList.toggle("active", a.dataset.nav === (view === "session" ? "sessions" : view));
  try {
    if (view === "session") closeView = await sessionView(main, decodeURIComponent(param), tip);
    else if (view === "supervision") closeView = await supervisionView(main);
    else if (view === "rollout") closeView = await rolloutView(main);
    else await sessionsView(main);
  } catch (err) {
    showError(err);
  }
}

/** Asks once whether this server wants a token (GET /supervision needs it when --auth-token is set). */
async function start(): Promise<void> {
  try {
    const tree = await getJson<{ instance_id: string }>("supervision");
    byId("instance").textContent = `instance ${tree.instance_id}`;
  } catch (err) {
    if (!(err instanceof HttpError) || err.status !== 503) return showError(err);
  }
  login.hidden = true;
  forget.hidden = adminToken() === null;
  await show();
}

login.addEventListener("submit", (e) => {
  e.preventDefault();
  setAdminToken(tokenInput.value.trim());
  tokenInput.value = "";
  void start();
});
forget.addEventListener("click", askForToken);
window.addEventListener("hashchange", () => void show());
window.addEventListener("error", (e) => showError(e.error ?? e.message));
window.addEventListener("unhandledrejection", (e) => showError(e.reason));
byId("no-modules").remove();
void start();
