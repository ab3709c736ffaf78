// The timeline's time axis: ticks at round instants (every 0.1 s, 15 min, 1 day, 1 month …)
// chosen so that 2 to 6 fit the axis's width, each labelled only as precisely as its step needs
// (UTC; the day and zone on a line under the axis). Two
// ends of a short history no longer read the same minute.
import { parse } from "./dates.js";

const S = 1000;
const STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
  43200, 86400, 172800, 604800, 2592000, 7776000, 31536000].map((s) => s * S);
const pad = (n) => String(n).padStart(2, "0");

function label(d, step, withDay) {
  const day = d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
  if (step >= 86400 * S) return day;
  const clock = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + (step < 60 * S ? ":" + pad(d.getUTCSeconds()) : "")
    + (step < S ? "." + String(d.getUTCMilliseconds()).padStart(3, "0") : "");
  return withDay ? day + " " + clock : clock;
}

// [{at: fraction along the axis, text}], the first tick with its day and "UTC".
export function ticks(startIso, endIso, most = 6) {
  const a = parse(startIso);
  const b = parse(endIso);
  if (!a || !b || b <= a) return a ? [{ at: 0, text: label(a, S, true) + " UTC" }] : [];
  const span = b - a;
  // Round instants of a step that fall on the axis; the finest step with at most `most`, but
  // never fewer than two while a finer step has two (a span of 1.5 steps may hold only one).
  const count = (s) => Math.floor(b / s) - Math.ceil(a / s) + 1;
  let i = STEPS.findIndex((s) => count(s) <= most);
  if (i < 0) i = STEPS.length - 1;
  while (i > 0 && count(STEPS[i]) < 2) i -= 1;
  const step = STEPS[i];
  const every = Math.max(1, Math.ceil(count(step) / most)); // a finer step's extra ticks left out
  const out = [];
  let lastDay = "";
  for (let t = Math.ceil(a / step) * step, n = 0; t <= b; t += step, n += 1) {
    if (n % every) continue;
    const d = new Date(t);
    const day = d.toISOString().slice(0, 10);
    out.push({ at: (t - a) / span, text: label(d, step, day !== lastDay) + (out.length ? "" : " UTC") });
    lastDay = day;
  }
  return out.length ? out : [{ at: 0, text: label(a, S, true) + " UTC" }];
}

export function drawAxis(axis, startIso, endIso, dayLine) {
  axis.replaceChildren();
  // As many ticks as fit the axis's width (a phone's holds two or three).
  const list = ticks(startIso, endIso, Math.max(2, Math.min(6, Math.floor((axis.clientWidth || 660) / 110))));
  // The first label's day and zone go on a line of their own under the axis, so that the
  // clock labels fit beside each other.
  const m = list.length > 1 ? /^(\d{4}-\d{2}-\d{2}) (.+) UTC$/.exec(list[0].text) : null;
  if (m) list[0].text = m[2];
  if (dayLine) dayLine.textContent = m ? m[1] + " (UTC)" : "";
  for (const tick of list) {
    const span = document.createElement("span");
    span.className = "tl-tick";
    span.textContent = tick.text;
    span.style.left = (tick.at * 100).toFixed(2) + "%"; // CSSOM: allowed by the CSP
    if (tick.at > 0.8) span.classList.add("tl-tick-end");
    axis.appendChild(span);
  }
  // A label that would run into the one before it is left out (a phone's narrow axis): the
  // first (with its day and zone) always stays.
  if (!axis.clientWidth) return;
  let right = -Infinity;
  for (const span of [...axis.children]) {
    const box = span.getBoundingClientRect();
    if (box.left < right + 8) span.remove();
    else right = box.right;
  }
}
