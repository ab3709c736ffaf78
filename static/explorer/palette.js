// The status palette, defined once: explorer.css's :root holds --status-<status> (the fill)
// and --status-<status>-ink (text on it). Badges, legend swatches and the timeline use them
// there; the graph, drawn on a canvas, reads them here.

// Every version status, in the order the timeline stacks and lists them.
export const STATUSES = ["active", "contested", "alternative", "superseded", "contradicted", "revoked"];

// {status: [fill, ink]} as the page's style sheet has them.
export function statusColours(root = document.documentElement) {
  const css = getComputedStyle(root);
  const get = (name) => css.getPropertyValue(name).trim();
  return Object.fromEntries(STATUSES.map((s) => [s, [get("--status-" + s), get("--status-" + s + "-ink")]]));
}
