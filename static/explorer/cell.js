// The cell page: its graph (graph.js), timeline (timeline.js), history table (history.js) and
// as-of control (asof.js), each an ES module; this one starts them. They talk through DOM
// events: pmem-jump (timeline → graph), pmem-window (graph → timeline), pmem-select (graph →
// history table), pmem-focus (history table → graph).
import "./asof.js";
import { graph } from "./graph.js";
import { historyTable } from "./history.js";
import { timeline } from "./timeline.js";

const container = document.getElementById("graph");
if (container && typeof window.cytoscape === "function") {
  graph(container, document.getElementById("node-details"));
}
const box = document.getElementById("timeline");
if (box) timeline(box);
historyTable();
