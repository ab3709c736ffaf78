// The cell page's graph: draws a window of the provenance graph with Cytoscape.js (never the
// whole history: the server sends ~40 versions around the head with their evidence, operations
// and tombstones), extends it in place (older / newer), jumps it (timeline, jump form, a #v<id>
// in the URL), shows a selected node's details, mirrors the selection in the URL and in the
// history table (pmem-select events), and redraws when the cell changes (pmem-graph after an
// action, pmem-changed from the live poller). window.pmemGraph exposes what was drawn.
import { showDetails, title } from "./graph/details.js";
import { edgeKey, elements, versions as windowVersions } from "./graph/layout.js";
import { graphStyle } from "./graph/style.js";
import { inView, readable, wheelZoom, windowText, zoomAt } from "./graph/viewport.js";

const MAX_VERSIONS = 500; // what one window request may ask for (CONTRACT: limit max 500)
// Edges the explorer adds to the typed graph: operation → version, operation → observation.
const DERIVED = new Set(["applied_to", "caused_by"]);

export function graph(container, details) {
  const URL_BASE = container.dataset.url;
  const AS_OF = container.dataset.asOf || "";
  const STEP = Number(container.dataset.limit || 40);

  const state = {
    nodes: new Map(), edges: new Map(), older: 0, newer: 0, total: 0, anchor: null,
    head: null,
  };
  let cy = null;
  let selected = null;
  let busy = false;

  const $ = (id) => document.getElementById(id);
  const status = $("graph-window-status");
  const versions = () => windowVersions(state);

  // --- the window's data ----------------------------------------------------------------------

  function absorb(g, replace) {
    if (replace) {
      state.nodes.clear();
      state.edges.clear();
    }
    for (const n of g.nodes) state.nodes.set(n.id, n);
    for (const e of g.edges.concat(g.derived || [])) state.edges.set(edgeKey(e), e);
    state.total = g.window ? g.window.versions + g.window.older + g.window.newer : state.total;
    state.head = g.head ?? state.head;
  }

  // The selection is mirrored in the URL (#v<id>, #o<id>…, shareable) and in the history table.
  // A version is named in the URL by its place in the key (#v12), other nodes by their id.
  const hashOf = (n) => (n.kind === "version" && n.ordinal != null ? "v" + n.ordinal : n.id);

  function select(id, { scroll = false, fromHash = false, reveal = false } = {}) {
    selected = id && state.nodes.has(id) ? id : null;
    if (cy) {
      cy.elements(":selected").unselect();
      if (selected) {
        const el = cy.getElementById(selected);
        el.select();
        if (scroll) cy.animate({ center: { eles: el } }, { duration: 200 });
      }
    }
    showDetails(details, state, selected);
    const node = selected ? state.nodes.get(selected) : null;
    document.dispatchEvent(new CustomEvent("pmem-select", { detail: {
      id: selected, version: node && node.kind === "version" ? node.version : null,
      ordinal: node && node.kind === "version" ? node.ordinal : null } }));
    if (!fromHash) {
      const hash = selected ? "#" + hashOf(node) : "";
      if (location.hash !== hash) history.replaceState(history.state, "", location.pathname + location.search + hash);
    }
    container.dataset.selected = selected || "";
    // The details sit beside the graph (below it on a phone): a tap brings them into view.
    if (reveal && selected) details.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  // --- viewport -------------------------------------------------------------------------------

  // A long window would be fitted into illegibly small type: keep a readable zoom and show the
  // newest end (the right); the rest is a drag, a Ctrl+wheel or the Fit button away.
  function reset() {
    readable(cy);
    showWindow();
  }

  // What the view holds, in the key's numbering (on every pan and zoom, once per frame).
  let pending = false;
  function showWindow() {
    if (!status || pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      status.textContent = windowText(inView(cy), versions().length, state.total);
    });
  }

  const zoomBy = (factor, at) => zoomAt(cy, factor, at);
  wheelZoom(container, () => cy);

  // --- drawing --------------------------------------------------------------------------------

  function updateControls() {
    const shown = versions().length;
    const older = $("graph-older");
    const newer = $("graph-newer");
    if (older) {
      older.disabled = busy || state.older === 0;
      older.querySelector("[data-count]").textContent = state.older ? "(" + state.older.toLocaleString("en") + ")" : "";
    }
    if (newer) {
      newer.disabled = busy || state.newer === 0;
      newer.querySelector("[data-count]").textContent = state.newer ? "(" + state.newer.toLocaleString("en") + ")" : "";
    }
    if (status && !cy) status.textContent = windowText([], shown, state.total);
    else showWindow();
    const vs = versions();
    container.dataset.oldest = vs.length ? vs[0].version : "";
    container.dataset.newest = vs.length ? vs[vs.length - 1].version : "";
    document.dispatchEvent(new CustomEvent("pmem-window", { detail: {
      oldest: vs.length ? vs[0].version : null, newest: vs.length ? vs[vs.length - 1].version : null,
      older: state.older, newer: state.newer } }));
  }

  function draw({ keepView = false } = {}) {
    const view = cy && keepView ? { zoom: cy.zoom(), pan: { ...cy.pan() } } : null;
    if (cy) cy.destroy();
    container.replaceChildren();
    cy = cytoscape({
      container, elements: elements(state), style: graphStyle(), layout: { name: "preset", fit: false },
      minZoom: 0.005, maxZoom: 2.5, boxSelectionEnabled: false, autoungrabify: true,
      userZoomingEnabled: false, // zoom: Ctrl/⌘ + wheel or the buttons (the wheel scrolls the page)
    });
    if (view) {
      cy.zoom(view.zoom);
      cy.pan(view.pan);
    } else {
      reset();
    }
    cy.on("tap", "node", (evt) => select(evt.target.id(), { reveal: true }));
    cy.on("viewport", showWindow);
    if (selected && state.nodes.has(selected)) select(selected);
    else if (selected) select(null);
    const edges = cy.edges();
    const counts = { nodes: cy.nodes().length, edges: edges.length,
                     typed: edges.filter((e) => !DERIVED.has(e.data("type"))).length,
                     derived: edges.filter((e) => DERIVED.has(e.data("type"))).length,
                     versions: versions().length, older: state.older, newer: state.newer };
    const first = !window.pmemGraph;
    window.pmemGraph = { ...window.pmemGraph, ...counts, renders: (window.pmemGraph?.renders || 0) + 1, cy };
    // When the first drawing reached the screen, in ms since navigation (the benchmark's
    // "time until Chromium shows the drawn graph").
    if (first) requestAnimationFrame(() => { window.pmemGraph.drawnAt = performance.now(); });
    container.dataset.nodes = counts.nodes;
    container.dataset.edges = counts.edges;
    container.dataset.typedEdges = counts.typed;
    container.dataset.drawn = "1";
    updateControls();
  }

  function fail(message) {
    if (status) status.textContent = message;
    const note = $("graph-jump-status");
    if (note) note.textContent = message;
  }

  async function fetchWindow(params) {
    const q = new URLSearchParams(params);
    if (AS_OF) q.set("as_of", AS_OF);
    const response = await fetch(URL_BASE + "?" + q.toString(), { headers: { Accept: "application/json" } });
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

  async function guarded(work) {
    if (busy) return false;
    busy = true;
    updateControls();
    try {
      await work();
      return true;
    } catch (err) {
      if (!cy) container.textContent = err.message;
      fail(err.message);
      return false;
    } finally {
      busy = false;
      updateControls();
    }
  }

  // A new window (first load, a jump): replaces what is drawn.
  function jump(params, focus) {
    return guarded(async () => {
      const g = await fetchWindow({ limit: STEP, ...params });
      absorb(g, true);
      state.older = g.window.older;
      state.newer = g.window.newer;
      state.anchor = null;
      const target = focus || g.focus || null;
      if (target) selected = target;
      draw();
      if (target && cy.getElementById(target).nonempty()) {
        select(target, { scroll: true });
      }
    });
  }

  // Older / newer: the versions beyond the window's edge, added in place.
  function extend(side) {
    return guarded(async () => {
      const vs = versions();
      if (!vs.length) return;
      const edge = side === "older" ? vs[0] : vs[vs.length - 1];
      const g = await fetchWindow({ side, around: edge.version, limit: STEP });
      const before = new Set(state.nodes.keys());
      absorb(g, false);
      if (side === "older") state.older = g.window.older;
      else state.newer = g.window.newer;
      draw({ keepView: true });
      const added = cy.nodes().filter((n) => !before.has(n.id()));
      if (added.nonempty()) cy.animate({ center: { eles: added } }, { duration: 250 });
      const live = $("graph-live");
      if (live) live.textContent = "Added " + added.filter(".version").length + " " + side + " versions.";
    });
  }

  // After a change (an action, a worker's commit): the same span again, statuses refreshed.
  function refresh() {
    return guarded(async () => {
      const vs = versions();
      let params;
      if (!vs.length || state.newer === 0) {
        params = { limit: Math.min(MAX_VERSIONS, Math.max(STEP, vs.length + 5)) };
      } else {
        params = { around: vs[Math.floor(vs.length / 2)].version, limit: Math.min(MAX_VERSIONS, vs.length) };
      }
      const g = await fetchWindow(params);
      const sig = (x) => JSON.stringify([...x.nodes.values()].map((n) => n.id + ":" + (n.status || "") + ":" + (n.support ?? "")).sort().concat([x.edges.size]));
      const old = sig(state);
      const keepAnchor = state.anchor;
      const shownBefore = new Set(vs.map((v) => v.id));
      absorb(g, true);
      state.older = g.window.older;
      state.newer = g.window.newer;
      state.anchor = state.nodes.has(keepAnchor) ? keepAnchor : null;
      if (sig(state) === old && cy) return;
      // New versions (an action, a commit): the view moves to the newest end so none is cut off.
      const grew = versions().some((v) => !shownBefore.has(v.id));
      draw({ keepView: !!cy && !grew });
    });
  }

  function fromHash() {
    const m = /^#([veot])(\d+)$/.exec(location.hash);
    return m ? m[1] + m[2] : null;
  }

  // The node a URL's #v12 (the key's 12th version) or #o34 (operation 34) names, if drawn.
  function nodeNamed(name) {
    if (!name.startsWith("v")) return state.nodes.has(name) ? name : null;
    const ordinal = Number(name.slice(1));
    const n = [...state.nodes.values()].find((x) => x.kind === "version" && x.ordinal === ordinal);
    return n ? n.id : null;
  }

  // A version outside the drawn window: the window moves there (the server finds v12).
  function focusNode(name, options = {}) {
    if (!name) return;
    const id = nodeNamed(name);
    if (id) select(id, { scroll: true, ...options });
    else if (name.startsWith("v")) jump({ jump: name }, null);
  }

  // --- controls -------------------------------------------------------------------------------

  const on = (id, event, fn) => { const el = $(id); if (el) el.addEventListener(event, fn); };
  on("graph-older", "click", () => extend("older"));
  on("graph-newer", "click", () => extend("newer"));
  on("graph-zoom-in", "click", () => zoomBy(1.25));
  on("graph-zoom-out", "click", () => zoomBy(1 / 1.25));
  on("graph-fit", "click", () => { if (cy) { cy.stop(true); cy.fit(undefined, 24); } });
  on("graph-reset", "click", reset);
  on("graph-head", "click", () => jump({}, null));
  on("jump-form", "submit", (event) => {
    event.preventDefault();
    const input = $("jump-to");
    const text = input.value.trim();
    if (!text) return;
    const note = $("graph-jump-status");
    if (note) note.textContent = "";
    jump({ jump: text }, null).then((ok) => {
      if (ok && note && selected) note.textContent = "Showing " + title(state.nodes.get(selected)) + ".";
    });
  });

  // Keyboard: the graph is focusable; arrows walk the nodes left to right, +/− zoom, 0 fits.
  container.addEventListener("keydown", (event) => {
    if (!cy) return;
    const order = cy.nodes().sort((a, b) => a.position("x") - b.position("x") || a.position("y") - b.position("y"));
    const ids = order.map((n) => n.id());
    let i = selected ? ids.indexOf(selected) : -1;
    if (event.key === "ArrowRight" || event.key === "ArrowDown") i = Math.min(ids.length - 1, i + 1);
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp") i = i < 0 ? ids.length - 1 : Math.max(0, i - 1);
    else if (event.key === "Home") i = 0;
    else if (event.key === "End") i = ids.length - 1;
    else if (event.key === "+" || event.key === "=") { zoomBy(1.25); event.preventDefault(); return; }
    else if (event.key === "-") { zoomBy(1 / 1.25); event.preventDefault(); return; }
    else if (event.key === "0") { cy.fit(undefined, 24); event.preventDefault(); return; }
    else return;
    event.preventDefault();
    select(ids[i], { scroll: true });
  });

  window.addEventListener("hashchange", () => focusNode(fromHash()));
  // The timeline (timeline.js) asks for a jump.
  document.addEventListener("pmem-jump", (event) => {
    const d = event.detail || {};
    jump(d.around ? { around: d.around } : { jump: d.at }, d.around ? "v" + d.around : null).then((ok) => {
      if (ok && selected) details.scrollIntoView({ block: "nearest", behavior: "smooth" });
    });
  });

  document.body.addEventListener("pmem-graph", refresh);
  document.body.addEventListener("pmem-changed", refresh);
  // A version link of the history table (history.js) asks for its node.
  document.addEventListener("pmem-focus", (event) => {
    event.preventDefault();
    focusNode(event.detail.id, { reveal: true });
  });
  window.pmemGraphApi = { jump, extend, select, reset, state };

  const initial = fromHash();
  if (container.dataset.around && !initial) {
    jump({ around: container.dataset.around }, "v" + container.dataset.around);
  } else if (initial && initial.startsWith("v")) {
    jump({ jump: initial }, null);
  } else {
    jump({}, null).then(() => { if (initial) focusNode(initial); });
  }
}
