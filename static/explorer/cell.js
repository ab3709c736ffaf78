// The cell page: draws a window of the provenance graph with Cytoscape.js (never the whole
// history: the server sends ~40 versions around the head with their evidence, operations and
// tombstones), extends it in place (older / newer), jumps it (timeline, jump form, a #v<id>
// in the URL), shows a selected node's details, mirrors the selection in the URL and in the
// history table, and redraws when the cell changes (pmem-graph after an action, pmem-changed
// from the live poller). window.pmemGraph exposes what was drawn.
"use strict";

(function () {
  const container = document.getElementById("graph");
  const details = document.getElementById("node-details");
  if (!container || typeof cytoscape !== "function") return;

  const URL_BASE = container.dataset.url;
  const AS_OF = container.dataset.asOf || "";
  const STEP = Number(container.dataset.limit || 40);
  const MAX_VERSIONS = 500; // what one window request may ask for (CONTRACT: limit max 500)

  // Rows by kind; a column per version (in id order), its operations above it and their
  // observations above them. On a plain chain (one accept per version) every edge stays in
  // its own column or runs between neighbours: nothing crosses.
  const ROW_Y = { evidence: 0, operation: 105, version: 215, tombstone: 320 };
  const COL_W = 160;
  const OP_SLOT = 120; // one more operation on the same version widens its column
  const OP_DX = 58; // an operation sits right of its version, its observation left of it
  const EV_DX = -34;
  const STATUS_COLOURS = {
    active: ["#1b7f3b", "#ffffff"], contested: ["#b35900", "#ffffff"],
    alternative: ["#f3d9a4", "#4a3000"], superseded: ["#d5d9de", "#1f2328"],
    contradicted: ["#b3261e", "#ffffff"], revoked: ["#3d3d3d", "#ffffff"],
  };

  // Edges the explorer adds to the typed graph: operation → version, operation → observation.
  const DERIVED = new Set(["applied_to", "caused_by"]);

  const state = {
    nodes: new Map(), edges: new Map(), older: 0, newer: 0, total: 0, anchor: null,
    head: null,
  };
  let cy = null;
  let selected = null;
  let busy = false;

  const $ = (id) => document.getElementById(id);
  const status = $("graph-window-status");

  function short(text, n) {
    const s = String(text ?? "");
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  function num(id) { return Number(String(id).slice(1)); }

  function versionName(n) {
    return n.ordinal != null ? "v" + n.ordinal : "id " + n.version;
  }

  // --- the window's data ----------------------------------------------------------------------

  function edgeKey(e) { return e.source + "|" + e.type + "|" + e.target; }

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

  function versions() {
    return [...state.nodes.values()].filter((n) => n.kind === "version")
      .sort((a, b) => a.version - b.version);
  }

  // --- layout ---------------------------------------------------------------------------------

  function positions() {
    const vs = versions();
    const ops = [...state.nodes.values()].filter((n) => n.kind === "operation")
      .sort((a, b) => num(a.id) - num(b.id));
    const opsOf = new Map(vs.map((v) => [v.id, []]));
    const loose = [];
    for (const o of ops) {
      const list = o.version != null ? opsOf.get("v" + o.version) : null;
      (list || loose).push(o);
    }
    // Column widths, then x: anchored at the first window's anchor version, so extending the
    // window adds columns at either end and never moves what is drawn.
    const width = (v) => COL_W + Math.max(0, opsOf.get(v.id).length - 1) * OP_SLOT;
    let anchorIdx = vs.findIndex((v) => v.id === state.anchor);
    if (anchorIdx < 0) {
      anchorIdx = vs.length - 1;
      state.anchor = vs.length ? vs[anchorIdx].id : null;
    }
    const x = new Map();
    let cursor = 0;
    for (let i = anchorIdx; i < vs.length; i++) {
      x.set(vs[i].id, cursor);
      cursor += width(vs[i]);
    }
    const rightEdge = cursor;
    cursor = 0;
    for (let i = anchorIdx - 1; i >= 0; i--) {
      cursor -= width(vs[i]);
      x.set(vs[i].id, cursor);
    }
    const pos = {};
    for (const v of vs) pos[v.id] = { x: x.get(v.id), y: ROW_Y.version };
    const evidenceAt = new Map();
    const place = (o, ox) => {
      pos[o.id] = { x: ox, y: ROW_Y.operation };
      const ev = o.evidence != null ? "e" + o.evidence : null;
      if (ev && state.nodes.has(ev) && !evidenceAt.has(ev)) evidenceAt.set(ev, ox - OP_DX + EV_DX);
    };
    for (const v of vs) {
      opsOf.get(v.id).forEach((o, i) => place(o, x.get(v.id) + OP_DX + i * OP_SLOT));
    }
    loose.forEach((o, i) => place(o, rightEdge + OP_DX + i * OP_SLOT));
    let spare = rightEdge + loose.length * OP_SLOT;
    const stacked = new Map();
    for (const n of state.nodes.values()) {
      if (n.kind === "evidence") {
        if (!evidenceAt.has(n.id)) {
          // Evidence of a support edge only: above the version it supports.
          const e = [...state.edges.values()].find((x) => x.type === "supported_by" && x.target === n.id);
          evidenceAt.set(n.id, e && pos[e.source] ? pos[e.source].x + EV_DX : (spare += COL_W));
        }
        const ex = evidenceAt.get(n.id);
        const k = stacked.get(ex) || 0;
        stacked.set(ex, k + 1);
        pos[n.id] = { x: ex, y: ROW_Y.evidence - k * 40 };
      } else if (n.kind === "tombstone") {
        const e = [...state.edges.values()].find((x) => x.type === "revokes" && x.source === n.id);
        const vx = e && pos[e.target] ? pos[e.target].x : (spare += COL_W);
        const k = stacked.get("t" + vx) || 0;
        stacked.set("t" + vx, k + 1);
        pos[n.id] = { x: vx, y: ROW_Y.tombstone + k * 38 };
      }
    }
    return pos;
  }

  function label(n) {
    if (n.kind === "version") return short(n.label, 22) + "\n" + versionName(n) + " · " + n.status;
    if (n.kind === "evidence") return "evidence " + n.label;
    if (n.kind === "operation") return n.label;
    return "✕ " + n.label;
  }

  function elements() {
    const pos = positions();
    const nodes = [...state.nodes.values()].map((n) => ({
      group: "nodes",
      data: { id: n.id, kind: n.kind, status: n.status || "", label: label(n) },
      position: pos[n.id],
      classes: n.kind + (n.status ? " " + n.status : ""),
    }));
    const edges = [...state.edges.values()]
      .filter((e) => state.nodes.has(e.source) && state.nodes.has(e.target))
      .map((e) => ({
        group: "edges",
        data: { id: edgeKey(e), source: e.source, target: e.target, type: e.type },
        classes: e.type,
      }));
    return nodes.concat(edges);
  }

  // Every edge is at least 4.5:1 against the white canvas (the old operation lines were 2.2:1).
  function style() {
    const s = [
      { selector: "node", style: {
        label: "data(label)", "font-size": 12, "text-wrap": "wrap", "text-max-width": 112,
        "text-valign": "center", "text-halign": "center", color: "#1d2330",
        "font-family": "system-ui, sans-serif", width: 112, height: 40,
        "border-width": 1, "border-color": "#58606b",
      } },
      { selector: "node.version", style: { shape: "round-rectangle", width: 124, height: 46 } },
      { selector: "node.evidence", style: { shape: "ellipse", "background-color": "#dbe9fb",
        "border-color": "#2f6fb3", width: 96, height: 34 } },
      { selector: "node.operation", style: { shape: "round-tag", "background-color": "#ece6f6",
        "border-color": "#5b3f96", width: 84, height: 28 } },
      { selector: "node.tombstone", style: { shape: "cut-rectangle", "background-color": "#f3f3f3",
        "border-color": "#3d3d3d", "border-style": "dashed", width: 90, height: 28 } },
      { selector: "node.revoked", style: { "border-style": "dashed" } },
      { selector: "node:selected", style: { "border-width": 4, "border-color": "#0b57d0",
        "overlay-color": "#0b57d0", "overlay-opacity": 0.12, "overlay-padding": 4 } },
      { selector: "edge", style: {
        width: 1.8, "curve-style": "straight", "target-arrow-shape": "triangle",
        "line-color": "#4b5563", "target-arrow-color": "#4b5563", "arrow-scale": 0.9,
      } },
      { selector: "edge.supersedes", style: { "line-color": "#1f2937", "target-arrow-color": "#1f2937", width: 2.4 } },
      { selector: "edge.alternative_of", style: { "line-color": "#a14f00", "target-arrow-color": "#a14f00", "line-style": "dashed", width: 2.2, "curve-style": "bezier" } },
      { selector: "edge.supported_by", style: { "line-color": "#1f5f9e", "target-arrow-color": "#1f5f9e", "line-style": "dotted", width: 2 } },
      { selector: "edge.restores", style: { "line-color": "#1d6b35", "target-arrow-color": "#1d6b35", "line-style": "dashed", width: 2.2, "curve-style": "bezier", "target-arrow-shape": "diamond" } },
      { selector: "edge.revokes", style: { "line-color": "#a3221b", "target-arrow-color": "#a3221b", "target-arrow-shape": "tee", width: 2.2 } },
      { selector: "edge.applied_to", style: { "line-color": "#5b3f96", "target-arrow-color": "#5b3f96", width: 1.8, "line-style": "dashed" } },
      { selector: "edge.caused_by", style: { "line-color": "#1f5f9e", "target-arrow-color": "#1f5f9e", width: 1.6, "line-style": "dashed", "target-arrow-shape": "vee" } },
    ];
    for (const [st, [bg, fg]] of Object.entries(STATUS_COLOURS)) {
      s.push({ selector: "node.version." + st, style: { "background-color": bg, color: fg } });
    }
    return s;
  }

  // --- details of the selected node -----------------------------------------------------------

  function row(dl, name, value, pre) {
    if (value === null || value === undefined || value === "") return;
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    if (pre) {
      const p = document.createElement("pre");
      p.textContent = String(value);
      dd.appendChild(p);
    } else {
      dd.textContent = String(value);
    }
    dl.append(dt, dd);
  }

  function link(dl, name, href, text) {
    if (!href) return;
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    dd.appendChild(a);
    dl.append(dt, dd);
  }

  // Nodes carry the head of an observation's text (cut on the server); the whole is a link away.
  function headOf(text, truncated) {
    return (text || "") + (truncated ? "…" : "");
  }

  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }

  function title(n) {
    if (n.kind === "version") return "Version " + versionName(n);
    return n.kind.charAt(0).toUpperCase() + n.kind.slice(1) + " " + n.id.slice(1);
  }

  function showDetails(id) {
    const n = id ? state.nodes.get(id) : null;
    details.replaceChildren();
    if (!n) {
      const p = document.createElement("p");
      p.className = "muted";
      p.textContent = "Select a node in the graph (click it, or focus the graph and use the arrow keys) or a version in the history to see its details.";
      details.appendChild(p);
      return;
    }
    const h = document.createElement("h2");
    h.textContent = title(n);
    const dl = document.createElement("dl");
    if (n.kind === "version") {
      row(dl, "Value", n.label, true);
      row(dl, "Status", n.status);
      row(dl, "Version", versionName(n) + " of this key (global id " + n.version + ")");
      row(dl, "Valid", when(n.valid_from) + " – " + (n.valid_to ? when(n.valid_to) : "now"));
      row(dl, "Support", n.support);
      const tr = document.getElementById("v" + n.version);
      if (tr) link(dl, "History", "#v" + n.version, "its row in the history");
    } else if (n.kind === "evidence") {
      row(dl, "Seq", n.seq);
      row(dl, "Source", n.source || "(none)");
      row(dl, "Received", when(n.received_at));
      row(dl, "Text", n.text ? headOf(n.text, n.text_truncated) : "(structured facts only)", true);
      link(dl, "Whole", n.page, "observation #" + n.seq + (n.text_truncated ? " (" + n.text_chars + " characters)" : ""));
    } else if (n.kind === "operation") {
      // Why it happened, even when its observation supports no version (a retraction's
      // "reported in error" text): the observation's node holds the text, once.
      const ev = n.evidence != null ? state.nodes.get("e" + n.evidence) : null;
      row(dl, "Operation", n.op + (n.requested && n.requested !== n.op ? " (asked: " + n.requested + ")" : ""));
      row(dl, "Actor", n.actor);
      row(dl, "Method", n.method);
      row(dl, "When", when(n.created_at));
      row(dl, "Reason", n.reason);
      row(dl, "Evidence seq", n.seq);
      if (ev) {
        row(dl, "Source", ev.source || "(none)");
        row(dl, "Evidence", ev.text ? headOf(ev.text, ev.text_truncated) : "(structured facts only)", true);
        link(dl, "Whole", ev.page, "observation #" + ev.seq);
      }
      const v = n.version != null ? state.nodes.get("v" + n.version) : null;
      row(dl, "Version", v ? versionName(v) + " (global id " + n.version + ")" : n.version);
      row(dl, "Raw model output", n.raw_output ? headOf(n.raw_output, n.raw_output_truncated) : "", true);
      if (n.asof_before) link(dl, "Memory", n.asof_before, "as of just before this operation");
      if (n.asof_after) link(dl, "", n.asof_after, "as of just after it");
    } else {
      const op = state.nodes.get("o" + n.operation);
      row(dl, "When", when(n.created_at));
      row(dl, "Operation", n.operation);
      if (op) { row(dl, "Actor", op.actor); row(dl, "Reason", op.reason); }
    }
    const links = [...state.edges.values()].filter((e) => e.source === id || e.target === id);
    if (links.length) {
      row(dl, "Edges", links.slice(0, 30).map((e) => e.source + " —" + e.type + "→ " + e.target).join("\n")
          + (links.length > 30 ? "\n… " + (links.length - 30) + " more" : ""), true);
    }
    details.append(h, dl);
  }

  // The selection is mirrored in the URL (#v<id>, #o<id>…, shareable) and in the history table.
  function select(id, { scroll = false, fromHash = false } = {}) {
    selected = id && state.nodes.has(id) ? id : null;
    if (cy) {
      cy.elements(":selected").unselect();
      if (selected) {
        const el = cy.getElementById(selected);
        el.select();
        if (scroll) cy.animate({ center: { eles: el } }, { duration: 200 });
      }
    }
    showDetails(selected);
    for (const tr of document.querySelectorAll("table.history tr.selected")) tr.classList.remove("selected");
    if (selected && selected.startsWith("v")) {
      const tr = document.getElementById(selected);
      if (tr) tr.classList.add("selected");
    }
    if (!fromHash) {
      const hash = selected ? "#" + selected : "";
      if (location.hash !== hash) history.replaceState(history.state, "", location.pathname + location.search + hash);
    }
    container.dataset.selected = selected || "";
  }

  // --- viewport -------------------------------------------------------------------------------

  // A long window would be fitted into illegibly small type: keep a readable zoom and show the
  // newest end (the right); the rest is a drag, a Ctrl+wheel or the Fit button away.
  function reset() {
    if (!cy || cy.nodes().empty()) return;
    cy.fit(undefined, 24);
    const MIN = 0.8;
    const MAX = 1.1;
    if (cy.zoom() > MAX) {
      cy.zoom(MAX);
      cy.center();
    }
    if (cy.zoom() >= MIN) return;
    const bb = cy.elements().boundingBox();
    cy.zoom(MIN);
    cy.pan({ x: cy.width() - 24 - bb.x2 * MIN, y: cy.height() / 2 - ((bb.y1 + bb.y2) / 2) * MIN });
  }

  function zoomBy(factor, at) {
    if (!cy) return;
    const level = Math.min(cy.maxZoom(), Math.max(cy.minZoom(), cy.zoom() * factor));
    cy.zoom({ level, renderedPosition: at || { x: cy.width() / 2, y: cy.height() / 2 } });
  }

  // The wheel scrolls the page; Ctrl (or ⌘) + wheel zooms the graph.
  container.addEventListener("wheel", (event) => {
    if (!(event.ctrlKey || event.metaKey) || !cy) return;
    event.preventDefault();
    const box = container.getBoundingClientRect();
    zoomBy(event.deltaY < 0 ? 1.15 : 1 / 1.15, { x: event.clientX - box.left, y: event.clientY - box.top });
  }, { passive: false });

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
    if (status) {
      status.textContent = shown === state.total
        ? "All " + shown.toLocaleString("en") + " version" + (shown === 1 ? "" : "s") + " shown"
        : "Showing " + shown.toLocaleString("en") + " of " + state.total.toLocaleString("en") + " versions";
    }
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
      container, elements: elements(), style: style(), layout: { name: "preset", fit: false },
      minZoom: 0.03, maxZoom: 2.5, boxSelectionEnabled: false, autoungrabify: true,
      userZoomingEnabled: false, // zoom: Ctrl/⌘ + wheel or the buttons (the wheel scrolls the page)
    });
    if (view) {
      cy.zoom(view.zoom);
      cy.pan(view.pan);
    } else {
      reset();
    }
    cy.on("tap", "node", (evt) => select(evt.target.id()));
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
      absorb(g, true);
      state.older = g.window.older;
      state.newer = g.window.newer;
      state.anchor = state.nodes.has(keepAnchor) ? keepAnchor : null;
      if (sig(state) === old && cy) return;
      draw({ keepView: !!cy });
    });
  }

  function fromHash() {
    const m = /^#([veot])(\d+)$/.exec(location.hash);
    return m ? m[1] + m[2] : null;
  }

  // A version id outside the drawn window: the window moves there.
  function focusNode(id) {
    if (!id) return;
    if (state.nodes.has(id)) {
      select(id, { scroll: true });
    } else if (id.startsWith("v")) {
      jump({ around: id.slice(1) }, id);
    }
  }

  // --- controls -------------------------------------------------------------------------------

  const on = (id, event, fn) => { const el = $(id); if (el) el.addEventListener(event, fn); };
  on("graph-older", "click", () => extend("older"));
  on("graph-newer", "click", () => extend("newer"));
  on("graph-zoom-in", "click", () => zoomBy(1.25));
  on("graph-zoom-out", "click", () => zoomBy(1 / 1.25));
  on("graph-fit", "click", () => cy && cy.fit(undefined, 24));
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

  // The history table mirrors the graph: a version link selects its node (moving the window
  // if it lies outside), a selected node marks its row.
  document.addEventListener("click", (event) => {
    const a = event.target.closest && event.target.closest("a.vlink");
    if (!a) return;
    event.preventDefault();
    const id = a.getAttribute("href").slice(1);
    focusNode(id);
    history.replaceState(history.state, "", location.pathname + location.search + "#" + id);
    container.scrollIntoView({ block: "nearest", behavior: "smooth" });
  });
  window.addEventListener("hashchange", () => focusNode(fromHash()));
  // The timeline (timeline.js) asks for a jump.
  document.addEventListener("pmem-jump", (event) => {
    const d = event.detail || {};
    jump(d.around ? { around: d.around } : { jump: d.at }, d.around ? "v" + d.around : null);
  });

  document.body.addEventListener("pmem-graph", refresh);
  document.body.addEventListener("pmem-changed", refresh);
  window.pmemGraphApi = { jump, extend, select, reset, state };

  const initial = fromHash() || (container.dataset.around ? "v" + container.dataset.around : null);
  if (initial && initial.startsWith("v")) {
    jump({ around: initial.slice(1) }, initial);
  } else {
    jump({}, null).then(() => { if (initial) focusNode(initial); });
  }
})();
