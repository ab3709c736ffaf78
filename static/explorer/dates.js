// Every time the explorer shows, formatted here once and in one shape, "2026-12-01 14:03:05
// CET": the reader's local time with its zone (UTC kept on hover), and UTC where the graph, the
// timeline or a title names an instant exactly. The server writes the same shape in UTC
// (explorer_tags.utc_text); this module turns it into the reader's.

const LOCAL = new Intl.DateTimeFormat("en-US", {
  year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
  second: "2-digit", hourCycle: "h23", timeZoneName: "short",
});

// "2026-12-01 15:03:05 CET": the moment in the reader's zone, shaped as utcText is.
export function localText(value) {
  const d = parse(value);
  if (!d) return "";
  const p = Object.fromEntries(LOCAL.formatToParts(d).map((x) => [x.type, x.value]));
  return p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute + ":" + p.second + " " + p.timeZoneName;
}

const pad = (n) => String(n).padStart(2, "0");

// A Date from an ISO string (or a Date), null when it names no time.
export function parse(value) {
  const d = value instanceof Date ? value : new Date(value);
  return isNaN(d.getTime()) ? null : d;
}

// "2026-12-01 14:03:05 UTC", or "2026-12-01 14:03 UTC" without seconds; a value that names
// no time is shown as it is, and nothing as "".
export function utcText(value, { seconds = true } = {}) {
  if (value === null || value === undefined || value === "") return "";
  const d = parse(value);
  if (!d) return String(value);
  return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
    pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) +
    (seconds ? ":" + pad(d.getUTCSeconds()) : "") + " UTC";
}

// A datetime-local field's value: the moment in the browser's zone, to the second.
export function localInputValue(value) {
  const d = parse(value);
  if (!d) return "";
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}

// Every <time datetime> under root in the reader's local time, UTC on hover.
export function localizeTimes(root) {
  for (const el of (root || document).querySelectorAll("time[datetime]")) {
    if (el.dataset.localized) continue;
    const d = parse(el.getAttribute("datetime"));
    if (!d) continue;
    el.textContent = localText(d);
    el.title = utcText(d);
    el.dataset.localized = "1";
  }
}

// The browser's IANA zone ("Europe/Oslo"), UTC when it names none.
export function browserZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch (e) {
    return "UTC";
  }
}
