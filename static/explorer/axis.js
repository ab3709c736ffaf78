// The timeline's time axis: ticks at round instants (every 0.1 s, 15 min, 1 day, 1 month …)
// chosen so that 3 to 6 fit, each labelled only as precisely as its step needs (UTC). Two
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
  const step = STEPS.find((s) => span / s <= most) || STEPS[STEPS.length - 1];
  const out = [];
  let lastDay = "";
  for (let t = Math.ceil(a / step) * step; t <= b; t += step) {
    const d = new Date(t);
    const day = d.toISOString().slice(0, 10);
    out.push({ at: (t - a) / span, text: label(d, step, day !== lastDay) + (out.length ? "" : " UTC") });
    lastDay = day;
  }
  return out.length ? out : [{ at: 0, text: label(a, S, true) + " UTC" }];
}

export function drawAxis(axis, startIso, endIso) {
  axis.replaceChildren();
  for (const tick of ticks(startIso, endIso)) {
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
