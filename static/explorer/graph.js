// The cell page's graph with Cytoscape.js: a window of ~40 versions around the current value
// (never the whole history) with their evidence, operations and tombstones. It opens on the
// current value, pages the view by what it shows (paging.js), draws a summary when zoomed out
// too far to read (summary.js), jumps (timeline, jump form, #v12 in the URL), shows a node's
// details, mirrors the selection in the URL and the history table (pmem-select), and redraws
// when the cell changes (pmem-graph after an action, pmem-changed from the live poller).
import { showDetails, title } from "./graph/details.js";
import { edgeKey, elements, versions as windowVersions } from "./graph/layout.js";
import { graphStyle } from "./graph/style.js";
import { fetchGraph, fromHash, keyboard, nodeNamed, report } from "./graph/input.js";
import { beyondView, frame, loaded, placeAt, plan, screenX, setButtons, versionNode } from "./graph/paging.js";
import { groups, layoutFor, summaryElements, summaryText } from "./graph/summary.js";
import { inView, MIN_READABLE, PAD, readable, wheelZoom, windowText, zoomAt } from "./graph/viewport.js";

const MAX_VERSIONS = 500; // what one window request may ask for (CONTRACT: limit max 500)

export function graph(container, details) {
  const URL_BASE = container.dataset.url;
  const AS_OF = container.dataset.asOf || "";
  const STEP = Number(container.dataset.limit || 40);

  const state = {
    nodes: new Map(), edges: new Map(), older: 0, newer: 0, total: 0, anchor: null,
    head: null, mode: "detail",
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
        if (scroll) frame(cy, el);
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
  // current value (the newest end when it lies there); the rest is a drag, Older / Newer or
  // the summary (Fit) away.
  function reset() {
    if (state.mode !== "detail") {
      state.mode = "detail";
      draw();
      return;
    }
    readable(cy);
    const head = state.head && cy.getElementById(state.head);
    if (head && head.nonempty() && !inView(cy).includes(head.data("ordinal"))) frame(cy, head);
    showWindow();
  }

  // Too far out to read: the summary; a group (or zooming in) shows versions again.
  function summarize() {
    if (state.mode === "summary" || !cy) return;
    state.mode = "summary";
    draw();
  }
  const tooFar = () => state.mode === "detail" && cy && cy.zoom() < MIN_READABLE - 1e-6;
  function fitOrSummarize() {
    if (!cy || state.mode === "summary") return;
    cy.stop(true);
    cy.fit(undefined, PAD);
    if (tooFar()) summarize();
  }
  function openGroup(node) {
    const first = node.data("first");
    const last = node.data("last");
    state.mode = "detail";
    draw();
    readable(cy);
    const middle = versionNode(cy, Math.round((first + last) / 2)) || versionNode(cy, last);
    if (middle) frame(cy, middle);
    showWindow();
  }

  // What the view holds, in the key's numbering (on every pan and zoom, once per frame).
  let pending = false;
  function showWindow() {
    if (!status || pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      status.textContent = state.mode === "summary" ? summaryText(groups(state, cy.nodes(".group").length), state.total)
        : windowText(inView(cy), versions().length, state.total);
      updateButtons();
    });
  }

  function zoomBy(factor, at) {
    if (state.mode === "summary") {
      if (factor > 1) reset();
      return;
    }
    zoomAt(cy, factor, at);
    if (tooFar()) summarize();
  }
  wheelZoom(container, () => (state.mode === "summary" ? null : cy), () => { if (tooFar()) summarize(); });

  // --- drawing --------------------------------------------------------------------------------

  // Older / Newer by what the view holds: each says how many versions lie beyond the view on
  // its side (in the summary: beyond what is loaded).
  function updateButtons() {
    const beyond = state.mode === "detail" ? beyondView(cy, state.total, versions().length)
      : { older: state.older, newer: state.newer };
    setButtons(beyond, busy);
  }

  function updateControls() {
    const vs = versions();
    updateButtons();
    if (status && !cy) status.textContent = windowText([], vs.length, state.total);
    else showWindow();
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
    const summary = state.mode === "summary";
    const shape = summary ? layoutFor(container.clientWidth, container.clientHeight, MIN_READABLE, PAD) : null;
    container.dataset.mode = state.mode;
    cy = cytoscape({
      container, elements: summary ? summaryElements(state, shape) : elements(state), style: graphStyle(),
      layout: { name: "preset", fit: false },
      minZoom: 0.005, maxZoom: 2.5, boxSelectionEnabled: false, autoungrabify: true,
      userZoomingEnabled: false, // zoom: Ctrl/⌘ + wheel or the buttons (the wheel scrolls the page)
    });
    if (view && !summary) {
      cy.zoom(view.zoom);
      cy.pan(view.pan);
    } else if (summary) {
      readable(cy);
    } else {
      reset();
    }
    cy.on("tap", "node.group", (evt) => openGroup(evt.target));
    cy.on("tap", "node", (evt) => { if (!summary) select(evt.target.id(), { reveal: true }); });
    cy.on("viewport", showWindow);
    if (selected && state.nodes.has(selected)) select(selected);
    else if (selected) select(null);
    report(container, cy, { versions: versions().length, older: state.older, newer: state.newer, mode: state.mode });
    updateControls();
  }

  function fail(message) {
    if (status) status.textContent = message;
    const note = $("graph-jump-status");
    if (note) note.textContent = message;
  }

  const fetchWindow = (params) => fetchGraph(URL_BASE, AS_OF, params);

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
  function jump(params, focus, mode = "detail") {
    return guarded(async () => {
      const g = await fetchWindow({ limit: STEP, ...params });
      absorb(g, true);
      state.older = g.window.older;
      state.newer = g.window.newer;
      state.anchor = null;
      state.mode = mode;
      const target = focus || g.focus || null;
      if (target) selected = target;
      draw();
      if (target && cy.getElementById(target).nonempty()) {
        select(target, { scroll: true });
      }
    });
  }

  // Older / newer: the view moves by what it shows (paging.js); versions not drawn yet are
  // loaded around the page and added in place. In the summary the next window of as many
  // versions replaces the loaded one.
  function page(side) {
    const vs = versions();
    if (!vs.length) return;
    if (state.mode === "summary") {
      const edge = side === "older" ? vs[0] : vs[vs.length - 1];
      return jump({ side, around: edge.version, limit: Math.min(MAX_VERSIONS, vs.length) }, null, "summary");
    }
    return guarded(async () => {
      const next = plan(cy, side, state.total);
      if (!next) return reset();
      const sx = screenX(cy, next.at);
      if (!loaded(cy, next.from, next.to)) {
        const middle = Math.round((next.from + next.to) / 2);
        const g = await fetchWindow({ jump: "v" + middle, limit: Math.min(MAX_VERSIONS, Math.max(STEP, 3 * (next.to - next.from + 1))) });
        absorb(g, false);
        state.older = Math.min(state.older, g.window.older);
        state.newer = Math.min(state.newer, g.window.newer);
        draw({ keepView: true });
      }
      placeAt(cy, next.put, sx);
      const live = $("graph-live");
      if (live) live.textContent = "Showing v" + next.from + (next.to > next.from ? "–v" + next.to : "") + ".";
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

  // A version outside the drawn window: the window moves there (the server finds v12).
  function focusNode(name, options = {}) {
    if (!name) return;
    const id = nodeNamed(state, name);
    if (id) select(id, { scroll: true, ...options });
    else if (name.startsWith("v")) jump({ jump: name }, null);
  }

  // --- controls -------------------------------------------------------------------------------

  const on = (id, event, fn) => { const el = $(id); if (el) el.addEventListener(event, fn); };
  on("graph-older", "click", () => page("older"));
  on("graph-newer", "click", () => page("newer"));
  on("graph-zoom-in", "click", () => zoomBy(1.25));
  on("graph-zoom-out", "click", () => zoomBy(1 / 1.25));
  on("graph-fit", "click", fitOrSummarize);
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

  keyboard(container, () => cy, { selected: () => selected, select, zoomBy, fit: fitOrSummarize, open: openGroup });
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
  window.pmemGraphApi = { jump, page, select, reset, state };

  const initial = fromHash();
  if (container.dataset.around && !initial) {
    jump({ around: container.dataset.around }, "v" + container.dataset.around);
  } else if (initial && initial.startsWith("v")) {
    jump({ jump: initial }, null);
  } else {
    jump({}, null).then(() => { if (initial) focusNode(initial); });
  }
}
