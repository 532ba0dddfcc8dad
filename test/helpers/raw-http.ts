// A raw HTTP client for tests that look at the framing itself: it sends the request text
// as given on a fresh TCP connection, reads until the server closes it, and parses the
// response strictly (status line, headers, then a content-length, chunked or
// close-delimited body, a chunked one's trailers too), saying whether the body was complete.
import { connect } from "node:net";

export interface RawResponse {
  status: number;
  /** Lower-case names; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: Buffer;
  /** The body's framing was whole: every content-length byte, or the last chunk, arrived. */
  complete: boolean;
  chunked: boolean;
  /** A chunked body's trailers (lower-case names), once its last chunk arrived. */
  trailers: Record<string, string>;
}

/** Sends `text` (request line and headers, CRLF-terminated) to `url`'s host and port. */
export function rawRequest(url: string, text: string): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(text));
    const parts: Buffer[] = [];
    socket.on("data", (d: Buffer) => parts.push(d));
    socket.on("error", reject);
    socket.on("close", () => {
      try {
        resolve(parseResponse(Buffer.concat(parts)));
      } catch (err) {
        reject(err as Error);
      }
    });
  });
}

/** A GET of `path` over HTTP/`version`, with `headers`. */
export function rawGet(url: string, path: string, version = "1.1", headers: Record<string, string> = {}) {
  const lines = [`GET ${path} HTTP/${version}`, `host: ${new URL(url).host}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return rawRequest(url, `${lines.join("\r\n")}\r\n\r\n`);
}

export function parseResponse(bytes: Buffer): RawResponse {
  const end = bytes.indexOf("\r\n\r\n");
  if (end < 0) throw new Error(`no response head in ${bytes.length} bytes`);
  const [statusLine, ...lines] = bytes.subarray(0, end).toString("latin1").split("\r\n");
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine!);
  if (!status) throw new Error(`bad status line ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = bytes.subarray(end + 4);
  const chunked = headers["transfer-encoding"] === "chunked";
  const trailers = {};
  if (chunked) return { status: Number(status[1]), headers, chunked, ...dechunk(rest) };
  const length = headers["content-length"];
  if (length === undefined)
    return { status: Number(status[1]), headers, chunked, trailers, body: rest, complete: true };
  const n = Number(length);
  return {
    status: Number(status[1]),
    headers,
    chunked,
    trailers,
    body: rest.subarray(0, n),
    complete: rest.length === n,
  };
}

function dechunk(bytes: Buffer): { body: Buffer; complete: boolean; trailers: Record<string, string> } {
  const out: Buffer[] = [];
  const trailers: Record<string, string> = {};
  let at = 0;
  for (;;) {
    const eol = bytes.indexOf("\r\n", at);
    if (eol < 0) return { body: Buffer.concat(out), complete: false, trailers };
    const size = Number.parseInt(bytes.subarray(at, eol).toString("latin1"), 16);
    if (!Number.isInteger(size)) throw new Error(`bad chunk size at ${at}`);
    if (size === 0) return { body: Buffer.concat(out), ...lastChunk(bytes, eol + 2) };
    const start = eol + 2;
    if (bytes.length < start + size + 2) {
      out.push(bytes.subarray(start, Math.min(bytes.length, start + size)));
      return { body: Buffer.concat(out), complete: false, trailers };
    }
    if (!bytes.subarray(start + size, start + size + 2).equals(CRLF))
      throw new Error(`chunk at ${at} not ended by CRLF`);
    out.push(bytes.subarray(start, start + size));
    at = start + size + 2;
  }
}

/** The trailer lines after the last chunk, from `at`: complete once the empty line that ends them arrived. */
function lastChunk(bytes: Buffer, at: number): { complete: boolean; trailers: Record<string, string> } {
  const trailers: Record<string, string> = {};
  for (;;) {
    const eol = bytes.indexOf("\r\n", at);
    if (eol < 0) return { complete: false, trailers };
    if (eol === at) return { complete: true, trailers };
    const line = bytes.subarray(at, eol).toString("latin1");
    const colon = line.indexOf(":");
    if (colon < 1) throw new Error(`bad trailer line ${JSON.stringify(line)}`);
    trailers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    at = eol + 2;
  }
}

const CRLF = Buffer.from("\r\n");
