// Small DOM helpers of the viewer. Every text that comes from the server (messages, token
// texts, ids) goes in as a text node, never as HTML: a model's output cannot inject markup.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

/** An element with attributes (`on…` keys are listeners; false/undefined leave one out) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") el.addEventListener(key.slice(2).toLowerCase(), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/** Unix seconds (or an ISO string) as local date and time, with how long ago. */
export function when(value: number | string | null): string {
  if (value === null) return "—";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  const ago = Math.max(0, (Date.now() - date.getTime()) / 1000);
  const rel =
    ago < 90 ? `${Math.round(ago)} s` : ago < 5400 ? `${Math.round(ago / 60)} min` : `${Math.round(ago / 3600)} h`;
  return `${date.toLocaleString()} (${rel} ago)`;
}

/** Saves bytes as a file the browser downloads. */
export function saveAs(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
