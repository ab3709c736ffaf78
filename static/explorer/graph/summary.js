// Zoomed out, the graph shows a summary instead of specks: the loaded versions in as many groups
// as the view holds at a readable size, each naming its range (vN–vM), how many versions of
// each status it holds and, for the group that holds the current value, that value. Choosing
// a group shows its versions at a readable size.
import { versions } from "./layout.js";

const GROUP_W = 176;
const GROUP_H = 96;
const GAP_X = 44;
const GAP_Y = 36;

function short(text, n) {
  const s = String(text ?? "");
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

// How many groups fit side by side (and in rows, when fewer than three fit) in a view of
// width × height at the given zoom.
export function layoutFor(width, height, zoom, pad) {
  const cols = Math.max(1, Math.floor((width / zoom - 2 * pad + GAP_X) / (GROUP_W + GAP_X)));
  const rows = cols >= 3 ? 1 : Math.max(1, Math.floor((height / zoom - 2 * pad + GAP_Y) / (GROUP_H + GAP_Y)));
  return { cols, rows };
}

// Contiguous groups of the drawn versions (oldest first) with their ordinal range.
export function groups(state, count) {
  const vs = versions(state);
  const size = Math.max(1, Math.ceil(vs.length / Math.max(1, count)));
  const out = [];
  for (let i = 0; i * size < vs.length; i++) {
    const part = vs.slice(i * size, (i + 1) * size);
    const counts = {};
    for (const v of part) counts[v.status] = (counts[v.status] || 0) + 1;
    out.push({ id: "g" + i, first: part[0].ordinal, last: part[part.length - 1].ordinal, size: part.length,
               counts, head: part.find((v) => v.id === state.head) || null });
  }
  return out;
}

function label(g) {
  const range = g.first === g.last ? "v" + g.first : "v" + g.first + "–v" + g.last;
  const lines = [range, g.size + " version" + (g.size === 1 ? "" : "s"),
    Object.entries(g.counts).map(([s, c]) => c + " " + s).join(", ")];
  if (g.head) lines.push("current: “" + short(g.head.label, 14) + "”");
  return lines.join("\n");
}

// Cytoscape's elements of the summary: a group per node, oldest first (left to right, then
// the next row), each group pointing at the one before it as versions do.
export function summaryElements(state, { cols, rows }) {
  const list = groups(state, cols * rows);
  const out = [];
  list.forEach((g, i) => {
    out.push({ group: "nodes", data: { id: g.id, kind: "group", label: label(g), first: g.first, last: g.last },
               position: { x: (i % cols) * (GROUP_W + GAP_X), y: Math.floor(i / cols) * (GROUP_H + GAP_Y) },
               classes: "group" + (g.head ? " current" : "") });
    if (i) out.push({ group: "edges", data: { id: "gg" + i, source: g.id, target: list[i - 1].id, type: "supersedes" },
                      classes: "supersedes" });
  });
  return out;
}

export function summaryText(list, total) {
  if (!list.length) return "No versions.";
  const first = list[0].first;
  const last = list[list.length - 1].last;
  return "Summary of v" + first + "–v" + last + " of " + total.toLocaleString("en") + " in " + list.length
    + " group" + (list.length === 1 ? "" : "s") + ": choose one to see its versions.";
}
