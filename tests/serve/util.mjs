// Helpers shared by the serve checks (check_api.mjs, check_gen.mjs, check_queue.mjs); Node built-ins only.
// Requests go out as the Python checks they replace sent them: bodies are Python's json.dumps (", " and ": ",
// non-ASCII as \uXXXX), a fresh connection per request, Content-Length always set; messages print values as
// Python's repr would, so the lines read the same.
import http from "node:http";

// URL -> { host, port }
export function hostPort(url) {
  const u = new URL(url);
  return { host: u.hostname.replace(/^\[(.*)\]$/, "$1"), port: Number(u.port || 80) };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const now = () => performance.now() / 1e3; // seconds, monotonic

// Python's json.dumps (default arguments): the same bytes on the wire
export function pyDumps(v) {
  if (v === null || v === undefined) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "number") {
    if (Number.isNaN(v)) return "NaN";
    if (!Number.isFinite(v)) return v > 0 ? "Infinity" : "-Infinity";
    return Number.isInteger(v) ? String(v) : pyFloat(v);
  }
  if (typeof v === "string")
    return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  if (Array.isArray(v)) return "[" + v.map(pyDumps).join(", ") + "]";
  return "{" + Object.entries(v).map(([k, x]) => pyDumps(k) + ": " + pyDumps(x)).join(", ") + "}";
}

// Python's repr of a float
export function pyFloat(x) {
  if (x === null || x === undefined) return "None";
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, exps] = x.toExponential().split("e"); // the shortest digits that round-trip, like Python's repr
  const e = Number(exps);
  const neg = mant.startsWith("-");
  const digits = mant.replace("-", "").replace(".", "");
  let s;
  if (e < -4 || e >= 16) {
    s = digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "") + "e" + (e < 0 ? "-" : "+") +
      String(Math.abs(e)).padStart(2, "0");
  } else if (e < 0) {
    s = "0." + "0".repeat(-e - 1) + digits;
  } else if (digits.length <= e + 1) {
    s = digits + "0".repeat(e + 1 - digits.length) + ".0";
  } else {
    s = digits.slice(0, e + 1) + "." + digits.slice(e + 1);
  }
  return (neg ? "-" : "") + s;
}

// Python's f"{x:.Ne}"
export function fmtE(x, n) {
  return x.toExponential(n).replace(/e([+-])(\d)$/, "e$10$2");
}

// Python tuples, for repr: (a, b)
export class Tuple extends Array {}
export const tuple = (...xs) => Tuple.from(xs);

function strRepr(s) {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = q;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === "\\" || ch === q) out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20 || (c >= 0x7f && c <= 0xa0)) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + q;
}

function bytesRepr(b) {
  const q = b.includes(0x27) && !b.includes(0x22) ? '"' : "'";
  let out = "b" + q;
  for (const c of b) {
    const ch = String.fromCharCode(c);
    if (ch === "\\" || ch === q) out += "\\" + ch;
    else if (c === 0x0a) out += "\\n";
    else if (c === 0x0d) out += "\\r";
    else if (c === 0x09) out += "\\t";
    else if (c < 0x20 || c >= 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + q;
}

// Python's repr (and str for containers) of JSON values, Buffers (bytes) and Tuples
export function pyRepr(v) {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number") return Number.isInteger(v) && Math.abs(v) < 1e16 ? String(v) : pyFloat(v);
  if (typeof v === "string") return strRepr(v);
  if (Buffer.isBuffer(v)) return bytesRepr(v);
  if (v instanceof Tuple) return "(" + v.map(pyRepr).join(", ") + (v.length === 1 ? ",)" : ")");
  if (Array.isArray(v)) return "[" + v.map(pyRepr).join(", ") + "]";
  return "{" + Object.entries(v).map(([k, x]) => strRepr(k) + ": " + pyRepr(x)).join(", ") + "}";
}

// Python's str: strings as they are, everything else as repr
export const pyStr = (v) => (typeof v === "string" ? v : pyRepr(v));

// Python's s[:n] (code points, not UTF-16 units)
export const head = (s, n) => Array.from(s).slice(0, n).join("");
export const pyLen = (s) => Array.from(s).length;

// Python's truthiness of a JSON value
export function truthy(v) {
  if (v === null || v === undefined || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") return Object.keys(v).length > 0;
  return true;
}

// Python's == on JSON values (True == 1, 1 == 1.0, lists and dicts member by member)
export function eq(a, b) {
  const scalar = (x) => typeof x === "number" || typeof x === "boolean";
  if (scalar(a) && scalar(b)) return Number(a) === Number(b);
  if (a === undefined) a = null;
  if (b === undefined) b = null;
  if (a === null || b === null) return a === b;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    if ((a instanceof Tuple) !== (b instanceof Tuple)) return false;
    return a.every((x, i) => eq(x, b[i]));
  }
  if (typeof a === "object" && typeof b === "object") {
    const ka = Object.keys(a), kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && eq(a[k], b[k]));
  }
  return a === b;
}

// Python's str.index: the position, or an exception
export function index(s, sub) {
  const i = s.indexOf(sub);
  if (i < 0) throw new Error(`ValueError: substring not found: ${pyRepr(sub)}`);
  return i;
}

// Python's str.splitlines()
export function splitlines(s) {
  const lines = s.split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/);
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

// One request on a fresh connection, as Python's http.client sent it: Content-Length for a body (0 for a POST
// without one), a socket timeout of `timeout` s (idle, not total; none when 0). Resolves with the status, the
// headers (lower-case names), the body as text and as bytes.
export function request(host, port, method, path, { body = null, headers = {}, timeout = 0 } = {}) {
  return new Promise((resolve, reject) => {
    const h = { "Accept-Encoding": "identity", ...headers };
    const data = body === null ? null : Buffer.isBuffer(body) ? body : Buffer.from(body, "latin1");
    if (data !== null) h["Content-Length"] = String(data.length);
    else if (["POST", "PUT", "PATCH"].includes(method)) h["Content-Length"] = "0";
    const req = http.request({ host, port, method, path, headers: h, agent: false }, (res) => {
      const parts = [];
      res.on("data", (d) => parts.push(d));
      res.on("end", () => {
        const buf = Buffer.concat(parts);
        resolve({ status: res.statusCode, headers: res.headers, text: buf.toString("utf8"), buf });
      });
      res.on("error", reject);
    });
    if (timeout > 0) req.setTimeout(timeout * 1e3, () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end(data === null ? undefined : data);
  });
}
