// Turning an entry's payload (base64 in the API) into what a person reads:
// text, pretty JSON or a hex dump, and a one-line preview for the tail.

// Past this many bytes the hex view shows the head only: a dump of a
// multi-megabyte payload would freeze the tab.
const HEX_LIMIT = 64 * 1024;

export function decodeBase64(data) {
  const binary = atob(data || "");
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

// The payload as UTF-8 text, or null when it is not valid UTF-8.
export function asText(bytes) {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

// The payload as indented JSON, or null when it is not a JSON document.
export function asJson(bytes) {
  const text = asText(bytes);
  if (text === null) return null;
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return null;
  }
}

export function asHex(bytes) {
  const shown = bytes.subarray(0, HEX_LIMIT);
  const lines = [];
  for (let off = 0; off < shown.length; off += 16) {
    const row = shown.subarray(off, off + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  |${ascii}|`);
  }
  if (bytes.length > HEX_LIMIT) lines.push(`… ${bytes.length - HEX_LIMIT} more bytes`);
  return lines.join("\n");
}

// The view a payload opens in: JSON when it parses, else text, else hex.
export function bestFormat(bytes) {
  if (asJson(bytes) !== null) return "json";
  if (asText(bytes) !== null) return "text";
  return "hex";
}

export function render(bytes, format) {
  if (format === "json") {
    const json = asJson(bytes);
    return json === null ? { text: "not a JSON document", invalid: true } : { text: json, invalid: false };
  }
  if (format === "text") {
    const text = asText(bytes);
    return text === null ? { text: "not valid UTF-8 text", invalid: true } : { text, invalid: false };
  }
  return { text: asHex(bytes), invalid: false };
}

export function preview(bytes, max = 120) {
  const text = asText(bytes);
  if (text !== null) {
    const line = text.replace(/\s+/g, " ");
    return line.length > max ? `${line.slice(0, max)}…` : line;
  }
  const hex = Array.from(bytes.subarray(0, max / 3), (b) => b.toString(16).padStart(2, "0")).join(" ");
  return `0x ${hex}${bytes.length > max / 3 ? " …" : ""}`;
}

export function formatTime(ms) {
  if (ms == null) return "–";
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString().replace("T", " ").replace("Z", " UTC");
}

export function formatSize(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
