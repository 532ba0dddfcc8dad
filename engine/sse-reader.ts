// Reads a Server-Sent Events stream (an engine's streamed reply) into its events' data:
// the `data:` lines of each event joined by "\n", handed on as one Buffer per event when
// the blank line that ends it arrives. Other fields (`event:`, `id:`, `retry:`) and
// comments are skipped; the engines' streams carry only data. A line may span any number
// of network reads (a final event with a routing-replay payload is megabytes): each read
// is scanned once, and a long line is joined once, when it ends. An event the stream ends
// before finishing is dropped, as the SSE standard says. The pieces read are kept as views:
// the engine client hands on memory of their own (reply-stream.ts), never a reused buffer.

const LF = 0x0a;
const CR = 0x0d;
const DATA = Buffer.from("data:");

export async function* sseEvents(body: AsyncIterable<Buffer>): AsyncGenerator<Buffer, void, undefined> {
  let partial: Buffer[] = []; // the current line's pieces so far
  let data: Buffer[] | undefined; // the current event's data lines
  for await (const piece of body) {
    let at = 0;
    for (let nl = piece.indexOf(LF, at); nl !== -1; nl = piece.indexOf(LF, at)) {
      let line = piece.subarray(at, nl);
      at = nl + 1;
      if (partial.length > 0) {
        partial.push(line);
        line = Buffer.concat(partial);
        partial = [];
      }
      if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, line.length - 1);
      if (line.length === 0) {
        if (data !== undefined) yield data.length === 1 ? data[0]! : join(data);
        data = undefined;
      } else if (startsWithData(line)) {
        const value = line.subarray(line.length > 5 && line[5] === 0x20 ? 6 : 5);
        (data ??= []).push(value);
      }
    }
    if (at < piece.length) partial.push(piece.subarray(at));
  }
}

function startsWithData(line: Buffer): boolean {
  return line.length >= 5 && line.compare(DATA, 0, 5, 0, 5) === 0;
}

function join(lines: Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const [i, line] of lines.entries()) {
    if (i > 0) parts.push(Buffer.from("\n"));
    parts.push(line);
  }
  return Buffer.concat(parts);
}

/** An event's data is the `[DONE]` sentinel both engines end their streams with. */
export function isDone(data: Buffer): boolean {
  return data.length === 6 && data.toString("latin1") === "[DONE]";
}
