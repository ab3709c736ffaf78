// The cell page: draws the provenance graph with Cytoscape.js, laid out in arrival order,
// shows a clicked node's details, and redraws when the cell changes (pmem-graph after an
// action, pmem-changed from the live poller). window.pmemGraph exposes what was drawn.
"use strict";

(function () {
  const container = document.getElementById("graph");
  const details = document.getElementById("node-details");
  if (!container || typeof cytoscape !== "function") return;

  // Rows by kind; columns by the order operations were applied.
  const ROW = { evidence: 0, operation: 1, version: 2, tombstone: 3 };
  const COL_W = 150;
  const ROW_H = 110;
  const OP_SHIFT = 52;
  const STATUS_COLOURS = {
    active: ["#1b7f3b", "#ffffff"], contested: ["#b35900", "#ffffff"],
    alternative: ["#f3d9a4", "#4a3000"], superseded: ["#d5d9de", "#2b2f33"],
    contradicted: ["#b3261e", "#ffffff"], revoked: ["#3d3d3d", "#ffffff"],
  };

  let cy = null;
  let signature = "";
  let selected = null;
  let graph = null;

  function short(text, n) {
    const s = String(text ?? "");
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  function positions(g) {
    const ops = g.nodes.filter((n) => n.kind === "operation");
    const colOfOp = new Map(ops.map((o, i) => [Number(o.id.slice(1)), i]));
    const col = new Map();
    ops.forEach((o, i) => col.set(o.id, i));
    // A version sits under the first operation that names it (the one that created it).
    for (const o of ops) {
      if (o.version == null) continue;
      const v = "v" + o.version;
      if (!col.has(v)) col.set(v, colOfOp.get(Number(o.id.slice(1))));
    }
    // Evidence sits above the first operation it caused (same seq).
    for (const n of g.nodes.filter((n) => n.kind === "evidence")) {
      const o = ops.find((o) => o.seq != null && o.seq === n.seq);
      if (o) col.set(n.id, col.get(o.id));
    }
    for (const n of g.nodes.filter((n) => n.kind === "tombstone")) {
      if (colOfOp.has(n.operation)) col.set(n.id, colOfOp.get(n.operation));
    }
    let next = ops.length;
    const used = new Map();
    const pos = {};
    for (const n of g.nodes) {
      if (!col.has(n.id)) col.set(n.id, next++);
      const row = ROW[n.kind] ?? 4;
      const slot = row + ":" + col.get(n.id);
      const stack = used.get(slot) || 0;
      used.set(slot, stack + 1);
      // Operations sit a little right of their column, so the supported_by edge running
      // straight up from a version to its evidence does not pass under them.
      const shift = n.kind === "operation" ? OP_SHIFT : 0;
      pos[n.id] = { x: col.get(n.id) * COL_W + shift, y: row * ROW_H + stack * 38 };
    }
    return pos;
  }

  function label(n) {
    if (n.kind === "version") return short(n.label, 22) + "\n" + n.status;
    if (n.kind === "evidence") return "evidence " + n.label;
    if (n.kind === "operation") return n.label;
    return "✕ " + n.label;
  }

  function elements(g) {
    const pos = positions(g);
    const nodes = g.nodes.map((n) => ({
      group: "nodes",
      data: { id: n.id, kind: n.kind, status: n.status || "", label: label(n) },
      position: pos[n.id],
      classes: n.kind + (n.status ? " " + n.status : ""),
    }));
    const edges = g.edges.concat(g.derived).map((e, i) => ({
      group: "edges",
      data: { id: "edge" + i, source: e.source, target: e.target, type: e.type },
      classes: e.type,
    }));
    return nodes.concat(edges);
  }

  function style() {
    const s = [
      { selector: "node", style: {
        label: "data(label)", "font-size": 12, "text-wrap": "wrap", "text-max-width": 110,
        "text-valign": "center", "text-halign": "center", color: "#1d2330",
        "font-family": "system-ui, sans-serif", width: 112, height: 40,
        "border-width": 1, "border-color": "#58606b",
      } },
      { selector: "node.version", style: { shape: "round-rectangle", width: 118, height: 44 } },
      { selector: "node.evidence", style: { shape: "ellipse", "background-color": "#dbe9fb",
        "border-color": "#2f6fb3", width: 96, height: 34 } },
      { selector: "node.operation", style: { shape: "round-tag", "background-color": "#ece6f6",
        "border-color": "#6a4fa3", width: 84, height: 28 } },
      { selector: "node.tombstone", style: { shape: "cut-rectangle", "background-color": "#f3f3f3",
        "border-color": "#3d3d3d", "border-style": "dashed", width: 90, height: 28 } },
      { selector: "node.revoked", style: { "border-style": "dashed" } },
      { selector: "node:selected", style: { "border-width": 4, "border-color": "#0b57d0" } },
      { selector: "edge", style: {
        width: 1.6, "curve-style": "bezier", "target-arrow-shape": "triangle",
        "line-color": "#6b7280", "target-arrow-color": "#6b7280", "arrow-scale": 0.9,
      } },
      { selector: "edge.supersedes", style: { "line-color": "#374151", "target-arrow-color": "#374151", width: 2.2 } },
      { selector: "edge.alternative_of", style: { "line-color": "#b35900", "target-arrow-color": "#b35900", "line-style": "dashed", width: 2 } },
      { selector: "edge.supported_by", style: { "line-color": "#2f6fb3", "target-arrow-color": "#2f6fb3", "line-style": "dotted" } },
      { selector: "edge.revokes", style: { "line-color": "#b3261e", "target-arrow-color": "#b3261e", "target-arrow-shape": "tee", width: 2 } },
      { selector: "edge.applied_to", style: { "line-color": "#b9a9d9", "target-arrow-color": "#b9a9d9", width: 1, "line-style": "dashed" } },
    ];
    for (const [status, [bg, fg]] of Object.entries(STATUS_COLOURS)) {
      s.push({ selector: "node.version." + status, style: { "background-color": bg, color: fg } });
    }
    return s;
  }

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

  function showDetails(id) {
    const n = graph && graph.nodes.find((x) => x.id === id);
    details.replaceChildren();
    if (!n) {
      const p = document.createElement("p");
      p.className = "muted";
      p.textContent = "Click a node in the graph to see its details.";
      details.appendChild(p);
      return;
    }
    const h = document.createElement("h2");
    h.textContent = n.kind.charAt(0).toUpperCase() + n.kind.slice(1) + " " + n.id.slice(1);
    const dl = document.createElement("dl");
    if (n.kind === "version") {
      row(dl, "Value", n.label, true);
      row(dl, "Status", n.status);
      row(dl, "Valid", when(n.valid_from) + " – " + (n.valid_to ? when(n.valid_to) : "now"));
      row(dl, "Support", n.support);
    } else if (n.kind === "evidence") {
      row(dl, "Seq", n.seq);
      row(dl, "Source", n.source || "(none)");
      row(dl, "Received", when(n.received_at));
      row(dl, "Text", n.text ? headOf(n.text, n.text_truncated) : "(structured facts only)", true);
      link(dl, "Whole", n.page, "observation #" + n.seq + (n.text_truncated ? " (" + n.text_chars + " characters)" : ""));
    } else if (n.kind === "operation") {
      // Why it happened, even when its observation supports no version (a retraction's
      // "reported in error" text): the observation's node holds the text, once.
      const ev = n.evidence != null ? graph.nodes.find((x) => x.id === "e" + n.evidence) : null;
      row(dl, "Operation", n.op + (n.requested && n.requested !== n.op ? " (asked: " + n.requested + ")" : ""));
      row(dl, "Actor", n.actor);
      row(dl, "When", when(n.created_at));
      row(dl, "Reason", n.reason);
      row(dl, "Evidence seq", n.seq);
      if (ev) {
        row(dl, "Evidence", (ev.source ? "[" + ev.source + "] " : "") + (ev.text ? headOf(ev.text, ev.text_truncated) : "(structured facts only)"), true);
        link(dl, "Whole", ev.page, "observation #" + ev.seq);
      }
      row(dl, "Version", n.version);
      row(dl, "Raw model output", n.raw_output ? headOf(n.raw_output, n.raw_output_truncated) : "", true);
    } else {
      const op = graph.nodes.find((x) => x.id === "o" + n.operation);
      row(dl, "When", when(n.created_at));
      row(dl, "Operation", n.operation);
      if (op) { row(dl, "Actor", op.actor); row(dl, "Reason", op.reason); }
    }
    const links = graph.edges.concat(graph.derived).filter((e) => e.source === id || e.target === id);
    if (links.length) {
      row(dl, "Edges", links.map((e) => e.source + " —" + e.type + "→ " + e.target).join("\n"), true);
    }
    details.append(h, dl);
  }

  // A long history would be fitted into illegibly small type: keep a readable zoom and show
  // the newest end (the right), the rest is a drag away.
  function readable() {
    const MIN = 0.85;
    const MAX = 1.15;
    if (cy.zoom() > MAX) {
      cy.zoom(MAX);
      cy.center();
    }
    if (cy.zoom() >= MIN) return;
    const bb = cy.elements().boundingBox();
    cy.zoom(MIN);
    cy.pan({ x: cy.width() - 24 - bb.x2 * MIN, y: cy.height() / 2 - ((bb.y1 + bb.y2) / 2) * MIN });
  }

  function render(g) {
    graph = g;
    if (cy) cy.destroy();
    container.replaceChildren();
    cy = cytoscape({
      container, elements: elements(g), style: style(), layout: { name: "preset", fit: true, padding: 24 },
      minZoom: 0.2, maxZoom: 2.5, boxSelectionEnabled: false, autoungrabify: true,
    });
    readable();
    cy.on("tap", "node", (evt) => { selected = evt.target.id(); showDetails(selected); });
    if (selected && cy.getElementById(selected).nonempty()) {
      cy.getElementById(selected).select();
      showDetails(selected);
    } else if (selected) {
      selected = null;
      showDetails(null);
    }
    const counts = { nodes: cy.nodes().length, edges: cy.edges().length, typed: g.edges.length,
                     derived: g.derived.length };
    window.pmemGraph = { ...counts, renders: (window.pmemGraph?.renders || 0) + 1, cy };
    container.dataset.nodes = counts.nodes;
    container.dataset.edges = counts.edges;
    container.dataset.typedEdges = counts.typed;
  }

  async function load() {
    const response = await fetch(container.dataset.url, { headers: { Accept: "application/json" } });
    if (!response.ok) {
      container.textContent = response.status === 404 ? "This cell no longer exists." : "The graph could not be loaded.";
      return;
    }
    const g = await response.json();
    const sig = JSON.stringify([g.nodes.map((n) => n.id + ":" + (n.status || "") + ":" + (n.support ?? "")),
                                g.edges.length, g.derived.length]);
    if (sig === signature) return;
    signature = sig;
    render(g);
  }

  document.body.addEventListener("pmem-graph", load);
  document.body.addEventListener("pmem-changed", load);
  load();
})();
