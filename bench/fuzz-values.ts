/**
 * The fuzz's malformed values, from a seeded generator so a run can be repeated: bodies that
 * are not the JSON they claim, gzip bombs, request targets and hosts no client would send, and
 * random keys. The probe families put them into requests.
 */
import { gzipSync } from "node:zlib";

/** A seeded generator, so a run can be repeated exactly (FUZZ_SEED). */
export function random(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  const text = (length: number, alphabet = "abcdefghijklmnopqrstuvwxyz0123456789") =>
    Array.from({ length }, () => alphabet[int(alphabet.length)]).join("");
  const bytes = (length: number) => Buffer.from(Array.from({ length }, () => int(256)));
  return { next, int, pick, text, bytes };
}
export type Random = ReturnType<typeof random>;

/** Bodies that are not the JSON they claim to be, or JSON of the wrong shape. */
export function badJson(r: Random): Buffer {
  const variants = [
    () => Buffer.from(`{"a":${"[".repeat(r.int(5000) + 1)}`),
    () => Buffer.from(`{"a": 1,}`),
    () => Buffer.from(`{"a":"${r.text(20)}`),
    () => r.bytes(r.int(512) + 1),
    () => Buffer.from([0xef, 0xbb, 0xbf, ...Buffer.from('{"a":1}')]),
    () => Buffer.from(`{"a":"\\ud800"}`),
    () => Buffer.from(`{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}`),
    () => Buffer.from(`{"name":1e309,"slug":["${r.text(3)}"],"key":null}`),
    () => Buffer.from("null"),
    () => Buffer.from(`"${"x".repeat(r.int(100_000))}"`),
    () => Buffer.from(JSON.stringify(Array.from({ length: r.int(10_000) }, () => ({})))),
    () => Buffer.from(`{"a":1}${"\u0000".repeat(r.int(10) + 1)}`),
    () => Buffer.from([0xe0, 0x80, 0x22, 0x7b]),
  ];
  return r.pick(variants)();
}

/** A gzip bomb: `megabytes` of zeros in about a thousandth of the bytes. */
const bombs = new Map<number, Buffer>();
export function gzipBomb(megabytes: number): Buffer {
  let bomb = bombs.get(megabytes);
  if (!bomb) {
    bomb = gzipSync(Buffer.alloc(megabytes * 1024 * 1024), { level: 9 });
    bombs.set(megabytes, bomb);
  }
  return bomb;
}

/** Request targets no client library would send. */
export function oddTarget(r: Random, valid: string): string | Buffer {
  const variants: (() => string | Buffer)[] = [
    () => `http://evil.example${valid}`,
    () => `http://127.0.0.1:99999${valid}`,
    () => "*",
    () => `${valid}%00`,
    () => `${valid}/%E0%A4%A`,
    () => `/%E0${valid}`,
    () => `${valid}?x=%zz&y=%E0&z=%00`,
    () => `/${"a".repeat(r.int(8000) + 1000)}`,
    () => `//${valid}/../../etc/passwd`,
    () => `${valid}/${"%2e%2e/".repeat(20)}`,
    () => `/${r.text(12, "%/.\\;?#@:~!$&'()*+,=")}`,
    () => Buffer.concat([Buffer.from(`${valid}/`), r.bytes(8)]),
    () => "",
    () => "/../",
    () => `${valid}#frag`,
    () => "h",
  ];
  return r.pick(variants)();
}

/** Host headers that are not a host: ports out of range, escapes, literals, giant labels. */
export function oddHost(r: Random, slug: string, port: number): string | Buffer {
  const variants: (() => string | Buffer)[] = [
    () => `${slug}.localhost:99999`,
    () => `${slug}.localhost:-1`,
    () => `${slug}.localhost:${port}:${port}`,
    () => "%00.localhost",
    () => `${slug}%00.localhost`,
    () => "[::1]",
    () => `[::1]:${port}`,
    () => "[::1",
    () => `${"a".repeat(16_000)}.localhost`,
    () => `${r.text(63)}.${r.text(63)}.localhost`,
    () => "",
    () => " ",
    () => `${slug}.localhost/evil`,
    () => `${slug}.localhost@evil.example`,
    () => `user:pass@${slug}.localhost`,
    () => `${slug}..localhost`,
    () => `.${slug}.localhost.`,
    () => `xn--${r.text(10)}.localhost`,
    () => Buffer.from(`${slug}.l\u00f6calhost`, "latin1"),
    () => Buffer.from([0xe0, 0x2e, 0x6c, 0x6f]),
    () => `${slug}.localhost:0`,
    () => "127.0.0.1",
    () => "0x7f.1",
  ];
  return r.pick(variants)();
}

/** Authorization values: random keys (well-formed and not), huge ones, other schemes. */
export function randomAuth(r: Random, valid: string): string | Buffer {
  const variants: (() => string | Buffer)[] = [
    () => `Bearer rk_live_${r.text(32)}`,
    () => `Bearer rk_test_${r.text(r.int(80))}`,
    () => `Bearer ${r.text(r.int(200))}`,
    () => `Bearer ${"k".repeat(8000)}`,
    () => "Bearer",
    () => "Bearer ",
    () => `Basic ${Buffer.from(`${r.text(5)}:${r.text(5)}`).toString("base64")}`,
    () => `bearer ${valid}`,
    () => `Bearer ${valid}${r.text(1)}`,
    () => `Bearer ${valid.slice(0, -1)}`,
    () => Buffer.concat([Buffer.from("Bearer rk_live_"), r.bytes(24)]),
    () => `Bearer rmt_${r.text(40)}`,
  ];
  return r.pick(variants)();
}
