// How the graph looks: Cytoscape's style sheet. Version nodes take the status palette
// (palette.js, from explorer.css); kinds and edge types have their own shapes and lines.
import { statusColours } from "../palette.js";

// Every edge is at least 4.5:1 against the white canvas, so that a line reads as clearly as
// text (WCAG 1.4.11 asks 3:1 of graphics; the operation lines sit on pale nodes).
export function graphStyle() {
  const s = [
    { selector: "node", style: {
      label: "data(label)", "font-size": 12, "text-wrap": "wrap", "text-max-width": 112,
      "text-valign": "center", "text-halign": "center", color: "#1d2330",
      "font-family": "system-ui, sans-serif", width: 112, height: 40,
      "border-width": 1, "border-color": "#58606b",
      "min-zoomed-font-size": 11, // a label smaller than 11 px on screen is not drawn (Fit)
    } },
    { selector: "node.version", style: { shape: "round-rectangle", width: 124, height: 46 } },
    { selector: "node.evidence", style: { shape: "ellipse", "background-color": "#dbe9fb",
      "border-color": "#2f6fb3", width: 96, height: 34 } },
    { selector: "node.operation", style: { shape: "round-tag", "background-color": "#ece6f6",
      "border-color": "#5b3f96", width: 84, height: 28 } },
    { selector: "node.tombstone", style: { shape: "cut-rectangle", "background-color": "#f3f3f3",
      "border-color": "#3d3d3d", "border-style": "dashed", width: 90, height: 28 } },
    { selector: "node.revoked", style: { "border-style": "dashed" } },
    { selector: "node.version.head", style: { "border-width": 3, "border-color": "#1d2330" } },
    // The summary's groups (summary.js): larger type, so that Fit on a long window still reads.
    { selector: "node.group", style: { shape: "round-rectangle", width: 176, height: 96, "font-size": 13,
      "text-max-width": 166, "background-color": "#eef2f7", "border-color": "#4b5563" } },
    { selector: "node.group.current", style: { "border-width": 3, "border-color": "#1d2330" } },
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
  for (const [st, [bg, fg]] of Object.entries(statusColours())) {
    s.push({ selector: "node.version." + st, style: { "background-color": bg, color: fg } });
  }
  return s;
}
