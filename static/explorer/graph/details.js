// The details of the selected node, under the graph: what a version, an observation, an
// operation or a tombstone is, each value a reviewer reads in words, and links to the whole
// observation and to memory just before and after an operation.
import { utcText as when } from "../dates.js";

export function versionName(n) {
  return n.ordinal != null ? "v" + n.ordinal : "id " + n.version;
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

// A node as a reviewer names it: v12 for a version, "operation 34", "observation #5".
function nameOf(state, id) {
  const n = state.nodes.get(id);
  if (!n) return id;
  if (n.kind === "version") return versionName(n);
  if (n.kind === "evidence") return "observation " + n.label;
  if (n.kind === "operation") return n.op + " (operation " + id.slice(1) + ")";
  return "tombstone";
}

const EDGE_WORDS = { supersedes: "supersedes", alternative_of: "competes with", supported_by: "is supported by",
  revokes: "revokes", restores: "restores", applied_to: "made or changed", caused_by: "was caused by" };

// The operations on a version that the window holds: who, how, why and on what evidence.
function operationsOf(dl, state, n) {
  const ops = [...state.nodes.values()].filter((o) => o.kind === "operation" && o.version === n.version);
  for (const o of ops.sort((a, b) => Number(a.id.slice(1)) - Number(b.id.slice(1)))) {
    const ev = o.evidence != null ? state.nodes.get("e" + o.evidence) : null;
    const what = o.op + " by " + (o.actor || "—") + (o.method ? " (" + o.method + ")" : "")
      + ", " + when(o.created_at) + (o.reason_words ? " — ‘" + o.reason_words + "’" : "");
    row(dl, "Operation", what);
    if (ev) row(dl, "Evidence", "#" + ev.seq + (ev.source ? " [" + ev.source + "]" : "") + ": "
      + (ev.text ? headOf(ev.text, ev.text_truncated) : "(structured facts only)"), true);
  }
}

export function title(n) {
  if (n.kind === "version") return "Version " + versionName(n);
  return n.kind.charAt(0).toUpperCase() + n.kind.slice(1) + " " + n.id.slice(1);
}

export function showDetails(details, state, id) {
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
    row(dl, "Valid", when(n.valid_from) + " – " + (n.valid_to ? when(n.valid_to) : "now"));
    row(dl, "Support", n.support);
    operationsOf(dl, state, n);
    row(dl, "Id", "id " + n.version);
    const tr = document.getElementById("v" + n.ordinal);
    if (tr) link(dl, "History", "#v" + n.ordinal, "its row in the history");
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
    row(dl, "Operation", n.op + (n.requested && n.requested !== n.op ? " (as part of a " + n.requested + ")" : ""));
    row(dl, "Actor", n.actor);
    row(dl, "Method", n.method);
    row(dl, "When", when(n.created_at));
    row(dl, "Reason", n.reason_words || n.reason);
    row(dl, "Evidence seq", n.seq);
    if (ev) {
      row(dl, "Source", ev.source || "(none)");
      row(dl, "Evidence", ev.text ? headOf(ev.text, ev.text_truncated) : "(structured facts only)", true);
      link(dl, "Whole", ev.page, "observation #" + ev.seq);
    }
    const v = n.version != null ? state.nodes.get("v" + n.version) : null;
    row(dl, "Version", v ? versionName(v) : (n.version != null ? "id " + n.version : ""));
    row(dl, "Raw model output", n.raw_output ? headOf(n.raw_output, n.raw_output_truncated) : "", true);
    if (n.asof_before) link(dl, "Memory", n.asof_before, "as of just before this operation");
    if (n.asof_after) link(dl, "", n.asof_after, "as of just after it");
  } else {
    const op = state.nodes.get("o" + n.operation);
    row(dl, "When", when(n.created_at));
    row(dl, "Operation", n.operation);
    if (op) { row(dl, "Actor", op.actor); row(dl, "Reason", op.reason_words || op.reason); }
  }
  const links = [...state.edges.values()].filter((e) => e.source === id || e.target === id);
  if (links.length) {
    row(dl, "Links", links.slice(0, 30).map((e) => nameOf(state, e.source) + " " + (EDGE_WORDS[e.type] || e.type)
        + " " + nameOf(state, e.target)).join("\n")
        + (links.length > 30 ? "\n… " + (links.length - 30) + " more" : ""), true);
  }
  details.append(h, dl);
}
