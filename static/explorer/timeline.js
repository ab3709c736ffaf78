// The cell page's timeline: the whole chain of a key as a row of time buckets (drawn from an
// aggregate the server computes, never from every version), each bar stacked by status with
// a pattern per status (not colour alone) and a text label. Clicking (or Enter on) a bucket
// asks the graph to jump there (a pmem-jump event that graph.js answers); the drawn window is
// marked on the timeline (pmem-window events from graph.js). Each segment's colour is the
// status palette's (explorer.css: .tl-<status>).
import { drawAxis } from "./axis.js";
import { utcText } from "./dates.js";
import { STATUSES as ORDER } from "./palette.js";

const MIN_SEGMENT = 3; // px: a rare status (one revocation among thousands) stays visible
const BUCKETS = 60; // the server's default
const FINGER = 44; // px: on a touch screen or a phone each bar is at least a finger wide
const fmt = (iso) => utcText(iso, { seconds: false });

export function timeline(box) {
  let buckets = [];

  function describe(b) {
    const parts = ORDER.filter((s) => b.counts[s]).map((s) => b.counts[s].toLocaleString("en") + " " + s);
    return fmt(b.start) + " – " + fmt(b.end) + ": " + b.total.toLocaleString("en") + " version"
      + (b.total === 1 ? "" : "s") + " (" + parts.join(", ") + ")";
  }

  function draw(data) {
    buckets = data.buckets || [];
    const bars = box.querySelector(".timeline-bars");
    const summary = box.querySelector(".timeline-summary");
    bars.replaceChildren();
    if (!buckets.length) {
      summary.textContent = "No versions.";
      return;
    }
    const max = Math.max(...buckets.map((b) => b.total));
    const height = bars.clientHeight || 56;
    for (const b of buckets) {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "tl-bucket";
      button.dataset.first = b.first;
      button.dataset.last = b.last;
      button.setAttribute("aria-label", describe(b) + ". Show these versions in the graph.");
      button.title = describe(b);
      if (b.total) {
        // sqrt: a bucket of 5 next to one of 5,000 still shows.
        const h = Math.max(6, Math.round(Math.sqrt(b.total / max) * (height - 4)));
        const stack = document.createElement("span");
        stack.className = "tl-stack";
        stack.style.height = h + "px"; // CSSOM, which the CSP allows (no inline style attribute)
        const present = ORDER.filter((s) => b.counts[s]);
        const floors = present.length * MIN_SEGMENT;
        for (const s of present) {
          const seg = document.createElement("span");
          seg.className = "tl-seg tl-" + s;
          seg.style.height = (MIN_SEGMENT + Math.max(0, h - floors) * (b.counts[s] / b.total)) + "px";
          stack.appendChild(seg);
        }
        button.appendChild(stack);
      } else {
        button.disabled = true;
      }
      li.appendChild(button);
      bars.appendChild(li);
    }
    const first = buckets[0];
    const last = buckets[buckets.length - 1];
    drawAxis(box.querySelector(".timeline-axis"), first.start, last.end, box.querySelector(".timeline-day"));
    const totals = {};
    for (const b of buckets) for (const s of ORDER) totals[s] = (totals[s] || 0) + (b.counts[s] || 0);
    summary.textContent = (data.versions ?? 0).toLocaleString("en") + " versions: "
      + ORDER.filter((s) => totals[s]).map((s) => totals[s].toLocaleString("en") + " " + s).join(", ") + ".";
    rove(null);
    box.dataset.buckets = buckets.length;
    box.dataset.drawn = "1";
  }

  function mark(detail) {
    for (const button of box.querySelectorAll(".tl-bucket")) {
      const first = Number(button.dataset.first);
      const last = Number(button.dataset.last);
      const inside = detail.oldest != null && last >= detail.oldest && first <= detail.newest;
      button.classList.toggle("in-window", inside);
      button.setAttribute("aria-current", inside ? "true" : "false");
    }
    if (!box.contains(document.activeElement)) rove(null);
  }

  // One tab stop for the whole bar (roving tabindex): arrows move along it, Home / End jump to
  // its ends, Enter or Space shows that stretch in the graph.
  function rove(target) {
    const all = [...box.querySelectorAll("button.tl-bucket:not([disabled])")];
    if (!all.length) return;
    const keep = target && all.includes(target) ? target
      : all.find((b) => b.classList.contains("in-window")) || all[all.length - 1];
    for (const b of all) b.tabIndex = b === keep ? 0 : -1;
    return keep;
  }
  box.addEventListener("keydown", (event) => {
    const current = event.target.closest && event.target.closest("button.tl-bucket");
    if (!current) return;
    const all = [...box.querySelectorAll("button.tl-bucket:not([disabled])")];
    let i = all.indexOf(current);
    if (event.key === "ArrowRight" || event.key === "ArrowDown") i = Math.min(all.length - 1, i + 1);
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp") i = Math.max(0, i - 1);
    else if (event.key === "Home") i = 0;
    else if (event.key === "End") i = all.length - 1;
    else return;
    event.preventDefault();
    rove(all[i]).focus();
  });

  box.addEventListener("click", (event) => {
    const button = event.target.closest("button.tl-bucket");
    if (!button || button.disabled) return;
    // The newest version of the bucket: the window then shows the bucket and what led to it.
    document.dispatchEvent(new CustomEvent("pmem-jump", { detail: { around: Number(button.dataset.last) } }));
  });
  document.addEventListener("pmem-window", (event) => mark(event.detail));

  // As many buckets as fit a finger wide each where fingers are used (4 at the fewest).
  function bucketCount() {
    const touch = window.matchMedia("(max-width: 640px), (pointer: coarse)").matches;
    const width = box.querySelector(".timeline-bars").clientWidth || box.clientWidth;
    return touch ? Math.max(4, Math.min(BUCKETS, Math.floor(width / (FINGER + 1)))) : BUCKETS;
  }

  async function load() {
    const url = box.dataset.url + (box.dataset.url.includes("?") ? "&" : "?") + "buckets=" + bucketCount();
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (!response.ok) {
      box.querySelector(".timeline-summary").textContent = "The timeline could not be loaded.";
      return;
    }
    draw(await response.json());
    const g = document.getElementById("graph");
    if (g && g.dataset.oldest) mark({ oldest: Number(g.dataset.oldest), newest: Number(g.dataset.newest) });
  }

  document.body.addEventListener("pmem-graph", load);
  document.body.addEventListener("pmem-changed", load);
  load();
}
