// Where the graph's camera sits: the newest versions at a readable size (labels of at least
// 11 px on screen) on load and after each update, and which versions the view holds, in the
// key's own numbering ("Showing v4–v9 of 300"). Below a readable zoom (Fit on a long window,
// zooming out) the graph draws a summary instead (summary.js).

export const LABEL_PX = 12; // the node labels' font size at zoom 1 (style.js)
export const MIN_READABLE = 11 / LABEL_PX;
const MAX_ZOOM = 1.1;
export const PAD = 24;

// The newest end (the right) in view at a zoom where every label reads at ≥ 11 px.
export function readable(cy) {
  if (!cy || cy.nodes().empty()) return;
  cy.stop(true); // an animation still under way would move the view after this
  cy.fit(undefined, PAD);
  if (cy.zoom() > MAX_ZOOM) {
    cy.zoom(MAX_ZOOM);
    cy.center();
  }
  if (cy.zoom() >= MIN_READABLE) return;
  const bb = cy.elements().boundingBox();
  cy.zoom(MIN_READABLE);
  cy.pan({ x: cy.width() - PAD - bb.x2 * MIN_READABLE,
           y: cy.height() / 2 - ((bb.y1 + bb.y2) / 2) * MIN_READABLE });
}

// The versions whose node lies (at least half) inside the view, oldest first.
export function inView(cy) {
  if (!cy) return [];
  const ext = cy.extent();
  return cy.nodes(".version").filter((n) => {
    const x = n.position("x");
    const y = n.position("y");
    return x >= ext.x1 && x <= ext.x2 && y >= ext.y1 && y <= ext.y2;
  }).map((n) => n.data("ordinal")).sort((a, b) => a - b);
}

// "Showing v4–v9 of 300" (what the view holds), and what else is loaded beside it.
export function windowText(seen, loaded, total) {
  const count = (n) => n.toLocaleString("en");
  if (!total) return "No versions.";
  if (!seen.length) return "No version in view (" + count(loaded) + " loaded): press Reset.";
  const first = seen[0];
  const last = seen[seen.length - 1];
  const range = first === last ? "v" + first : "v" + first + "–v" + last;
  let text = "Showing " + range + " of " + count(total);
  if (seen.length < loaded) text += " (" + count(loaded - seen.length) + " more loaded: drag or Fit)";
  return text;
}

export function zoomAt(cy, factor, at) {
  if (!cy) return;
  const level = Math.min(cy.maxZoom(), Math.max(cy.minZoom(), cy.zoom() * factor));
  cy.zoom({ level, renderedPosition: at || { x: cy.width() / 2, y: cy.height() / 2 } });
}

// The wheel scrolls the page; Ctrl (or ⌘) + wheel zooms the graph (a pinch on a touch pad
// arrives as Ctrl + wheel too; on a touch screen Cytoscape's own pinch zooms).
export function wheelZoom(container, getCy, onZoom) {
  container.addEventListener("wheel", (event) => {
    const cy = getCy();
    if (!(event.ctrlKey || event.metaKey) || !cy) return;
    event.preventDefault();
    const box = container.getBoundingClientRect();
    zoomAt(cy, event.deltaY < 0 ? 1.15 : 1 / 1.15, { x: event.clientX - box.left, y: event.clientY - box.top });
    if (onZoom) onZoom();
  }, { passive: false });
}
