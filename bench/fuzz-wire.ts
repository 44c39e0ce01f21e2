/**
 * The fuzz's wire: an HTTP/1.1 request written exactly as given, on a raw socket of its own, so
 * nothing between here and the server fixes it first; and the status line of what came back (or
 * what happened instead). The probe families build on it; bench/fuzzer.ts runs them.
 */
import { connect } from "node:net";

export type Component = "edge" | "control";
/** A status code, or what happened instead of an answer. */
export type Answer = number | "closed" | "reset" | "refused" | "timeout";

export interface Probe {
  component: Component;
  /** The family of malformation, for the counts. */
  kind: string;
  /** Written in order; a number is a pause of that many milliseconds (a slow body). */
  parts: (Buffer | number)[];
  /** Half-close once written: a body that ends before its Content-Length. */
  endAfter?: boolean;
  /** How long to wait for the status line. */
  timeoutMs?: number;
}

export type Header = [string, string | Buffer];

/** An HTTP/1.1 request, exactly as given: no header is added unless asked. */
export function http1(
  requestLine: string | Buffer,
  headers: Header[],
  body: Buffer = Buffer.alloc(0),
  contentLength: number | string | null = body.length,
): Buffer {
  const lines: Buffer[] = [Buffer.isBuffer(requestLine) ? requestLine : Buffer.from(requestLine)];
  if (contentLength !== null) lines.push(Buffer.from(`Content-Length: ${contentLength}`));
  for (const [name, value] of headers) {
    lines.push(Buffer.concat([Buffer.from(`${name}: `), Buffer.from(value)]));
  }
  const head = Buffer.concat(lines.flatMap((line) => [line, Buffer.from("\r\n")]));
  return Buffer.concat([head, Buffer.from("\r\n"), body]);
}

export const JSON_TYPE: Header = ["Content-Type", "application/json"];
export const CLOSE: Header = ["Connection", "close"];

/** Writes the probe on a fresh connection and reads the status line of its answer. */
export function send(port: number, probe: Probe): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1" });
    let received = Buffer.alloc(0);
    let settled = false;
    const done = (answer: Answer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done("timeout"), probe.timeoutMs ?? 5000);
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]).subarray(-65_536);
      // Interim answers (100 Continue) come before the real one.
      for (;;) {
        const match = /^HTTP\/1\.[01] (\d{3})[^\r\n]*\r?\n/.exec(received.toString("latin1"));
        if (!match) return;
        const status = Number(match[1]);
        if (status >= 200) return done(status);
        const end = received.indexOf("\r\n\r\n");
        if (end < 0) return;
        received = received.subarray(end + 4);
      }
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "ECONNREFUSED") done("refused");
      else done(error.code === "ECONNRESET" || error.code === "EPIPE" ? "reset" : "closed");
    });
    socket.on("close", () => done("closed"));
    socket.on("connect", async () => {
      for (const part of probe.parts) {
        if (settled || socket.destroyed) return;
        if (typeof part === "number") await new Promise((r) => setTimeout(r, part));
        else socket.write(part);
      }
      if (probe.endAfter && !settled) socket.end();
    });
  });
}

export const statusClass = (answer: Answer) =>
  typeof answer === "number" ? `${Math.floor(answer / 100)}xx` : answer;
