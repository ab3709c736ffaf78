// The drawn window as Cytoscape's elements: where each node sits (a preset layout) and what it
// says. A column per version (in id order), its operations above it and their observations
// above them. On a plain chain (one accept per version) every edge stays in its own column or
// runs between neighbours: nothing crosses.
import { versionName } from "./details.js";

export const ROW_Y = { evidence: 0, operation: 105, version: 215, tombstone: 320 };
const COL_W = 160;
const OP_SLOT = 120; // one more operation on the same version widens its column
const OP_DX = 58; // an operation sits right of its version, its observation left of it
const EV_DX = -34;

// The window's versions, oldest first.
export function versions(state) {
  return [...state.nodes.values()].filter((n) => n.kind === "version")
    .sort((a, b) => a.version - b.version);
}

function num(id) { return Number(String(id).slice(1)); }

export function edgeKey(e) { return e.source + "|" + e.type + "|" + e.target; }

function short(text, n) {
  const s = String(text ?? "");
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

export function positions(state) {
  const vs = versions(state);
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
    // The newest version; none at all when the key did not exist yet (as of a past time).
    anchorIdx = Math.max(0, vs.length - 1);
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

export function elements(state) {
  const pos = positions(state);
  const nodes = [...state.nodes.values()].map((n) => ({
    group: "nodes",
    data: { id: n.id, kind: n.kind, status: n.status || "", label: label(n), ordinal: n.ordinal ?? null },
    position: pos[n.id],
    classes: n.kind + (n.status ? " " + n.status : "") + (n.id === state.head ? " head" : ""),
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
