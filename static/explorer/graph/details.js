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
