// Older / Newer move the view by what it shows: the versions in view are n, a page shows the
// n just before (or after) them, the node at the page's edge landing where the view's other
// edge stood, so that a page neither skips a version nor shows one twice. Near either end of
// the history the page stops at v1 (or at the newest) and shows n all the same.
import { inView } from "./viewport.js";

export function versionNode(cy, ordinal) {
  return cy.nodes(".version").filter((n) => n.data("ordinal") === ordinal)[0] || null;
}

// The unbroken run of versions the view holds (a head drawn beside a far window is no part
// of it): [lo, hi], or null when no version is in view.
export function seenRange(cy) {
  const seen = inView(cy);
  if (!seen.length) return null;
  const set = new Set(seen);
  let lo = seen[Math.floor(seen.length / 2)];
  let hi = lo;
  while (set.has(lo - 1)) lo--;
  while (set.has(hi + 1)) hi++;
  return { lo, hi, n: hi - lo + 1 };
}

// The next page to `side` of what the view holds, or null at that end: the ordinals it shows
// and the move (the version `put` lands on screen where the version `at` is now).
export function plan(cy, side, last) {
  const r = seenRange(cy);
  if (!r) return null;
  const { lo, hi, n } = r;
  if (side === "older") {
    if (lo <= 1) return null;
    return lo - n >= 1 ? { from: lo - n, to: lo - 1, put: lo - 1, at: hi } : { from: 1, to: lo - 1, put: 1, at: lo };
  }
  if (hi >= last) return null;
  return hi + n <= last ? { from: hi + 1, to: hi + n, put: hi + 1, at: lo } : { from: hi + 1, to: last, put: last, at: hi };
}

// Whether every version from..to is drawn.
export function loaded(cy, from, to) {
  const have = new Set(cy.nodes(".version").map((n) => n.data("ordinal")));
  for (let o = from; o <= to; o++) if (!have.has(o)) return false;
  return true;
}

export function screenX(cy, ordinal) {
  const node = versionNode(cy, ordinal);
  return node ? node.renderedPosition("x") : null;
}

// Pans sideways so that version `ordinal` sits at screen x `sx`.
export function placeAt(cy, ordinal, sx) {
  const node = versionNode(cy, ordinal);
  if (!node || sx == null) return;
  cy.pan({ x: cy.pan().x + sx - node.renderedPosition("x"), y: cy.pan().y });
}

// A node and what explains it: its operations, its observations (theirs too), its tombstones.
function column(node) {
  const around = node.neighborhood("node");
  return node.union(around).union(around.filter(".operation").outgoers("node.evidence"));
}

// Brings a node into view with what explains it: centred sideways, and its column framed
// top to bottom (its observations above it kept in view; from the top when it is too tall).
export function frame(cy, node, pad = 16) {
  const z = cy.zoom();
  const bb = column(node).boundingBox();
  const x = cy.width() / 2 - node.position("x") * z;
  const tall = (bb.y2 - bb.y1) * z > cy.height() - 2 * pad;
  const y = tall ? pad - bb.y1 * z : cy.height() / 2 - ((bb.y1 + bb.y2) / 2) * z;
  cy.stop(true);
  cy.pan({ x, y });
}

// How many versions lie beyond the view on each side (with none in view, both ways are open).
export function beyondView(cy, total, drawn) {
  const seen = cy ? inView(cy) : [];
  if (!seen.length) return { older: drawn ? 1 : 0, newer: drawn ? 1 : 0 };
  return { older: seen[0] - 1, newer: total - seen[seen.length - 1] };
}

// Older / Newer: disabled at their end (or while a request runs), each with its count.
export function setButtons(beyond, busy) {
  for (const side of ["older", "newer"]) {
    const button = document.getElementById("graph-" + side);
    if (!button) continue;
    button.disabled = busy || beyond[side] <= 0;
    button.querySelector("[data-count]").textContent = beyond[side] > 0 ? "(" + beyond[side].toLocaleString("en") + ")" : "";
  }
}
