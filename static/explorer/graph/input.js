// The graph's input and output: the window requests (JSON, an error's own message kept), what was
// drawn (report) and the keyboard
// (the graph is focusable; arrows walk the nodes left to right, +/− zoom, 0 fits; in the
// summary arrows walk the groups and Enter shows the chosen group's versions).

export async function fetchGraph(base, asOf, params) {
  const q = new URLSearchParams(params);
  if (asOf) q.set("as_of", asOf);
  const response = await fetch(base + "?" + q.toString(), { headers: { Accept: "application/json" } });
  if (!response.ok) {
    let message = response.status === 404 ? "This cell no longer exists." : "The graph could not be loaded.";
    try {
      const body = await response.json();
      if (body.error) message = body.error;
    } catch (e) { /* not JSON */ }
    const err = new Error(message);
    err.status = response.status;
    throw err;
  }
  return response.json();
}

export function keyboard(container, getCy, { selected, select, zoomBy, fit, open }) {
  container.addEventListener("keydown", (event) => {
    const cy = getCy();
    if (!cy) return;
    const summary = cy.nodes(".group").nonempty();
    const order = cy.nodes().sort((a, b) => a.position("y") - b.position("y") || a.position("x") - b.position("x"));
    const byX = summary ? order : cy.nodes().sort((a, b) => a.position("x") - b.position("x") || a.position("y") - b.position("y"));
    const ids = byX.map((n) => n.id());
    const current = summary ? (cy.nodes(":selected")[0]?.id() ?? null) : selected();
    let i = current ? ids.indexOf(current) : -1;
    if (event.key === "ArrowRight" || event.key === "ArrowDown") i = Math.min(ids.length - 1, i + 1);
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp") i = i < 0 ? ids.length - 1 : Math.max(0, i - 1);
    else if (event.key === "Home") i = 0;
    else if (event.key === "End") i = ids.length - 1;
    else if (event.key === "+" || event.key === "=") { zoomBy(1.25); event.preventDefault(); return; }
    else if (event.key === "-") { zoomBy(1 / 1.25); event.preventDefault(); return; }
    else if (event.key === "0") { fit(); event.preventDefault(); return; }
    else if (event.key === "Enter" && summary && current) { event.preventDefault(); open(cy.getElementById(current)); return; }
    else return;
    event.preventDefault();
    if (summary) {
      cy.elements(":selected").unselect();
      cy.getElementById(ids[i]).select();
    } else {
      select(ids[i], { scroll: true });
    }
  });
}

// The node a URL's hash names (#v12, #o34, #e5, #t6), as "v12".
export function fromHash() {
  const m = /^#([veot])(\d+)$/.exec(location.hash);
  return m ? m[1] + m[2] : null;
}

// The drawn node a name stands for: #v12 is the key's 12th version, #o34 operation 34.
export function nodeNamed(state, name) {
  if (!name.startsWith("v")) return state.nodes.has(name) ? name : null;
  const ordinal = Number(name.slice(1));
  const n = [...state.nodes.values()].find((x) => x.kind === "version" && x.ordinal === ordinal);
  return n ? n.id : null;
}

// Edges the explorer adds to the typed graph: operation → version, operation → observation.
const DERIVED = new Set(["applied_to", "caused_by"]);

// What was drawn, for the tests and the benchmark: window.pmemGraph and the container's data.
export function report(container, cy, extra) {
  const edges = cy.edges();
  const counts = { nodes: cy.nodes().length, edges: edges.length,
                   typed: edges.filter((e) => !DERIVED.has(e.data("type"))).length,
                   derived: edges.filter((e) => DERIVED.has(e.data("type"))).length, ...extra };
  const first = !window.pmemGraph;
  window.pmemGraph = { ...window.pmemGraph, ...counts, renders: (window.pmemGraph?.renders || 0) + 1, cy };
  // When the first drawing reached the screen, in ms since navigation (the benchmark's
  // "time until Chromium shows the drawn graph").
  if (first) requestAnimationFrame(() => { window.pmemGraph.drawnAt = performance.now(); });
  container.dataset.nodes = counts.nodes;
  container.dataset.edges = counts.edges;
  container.dataset.typedEdges = counts.typed;
  container.dataset.drawn = "1";
}
