// The "as of" control: the date-time field is in the browser's zone (sent along as tz; the
// server answers with a canonical ?as_of= in UTC), and shows the current as-of in that zone.
// The cell page refreshes the control after each change (htmx): set up again each time.
import { browserZone, localInputValue } from "./dates.js";

function setUp(root) {
  const zone = browserZone();
  // Every other date-time field (the log's range) is read in the browser's zone too.
  for (const tz of root.querySelectorAll("form:not(.as-of) [data-browser-zone]")) tz.value = zone;
  for (const form of root.querySelectorAll("form.as-of")) {
    const tz = form.querySelector("[data-browser-zone]");
    const label = form.querySelector("[data-zone-label]");
    const field = form.querySelector("input[type=datetime-local]");
    if (tz) tz.value = zone;
    if (label) label.textContent = "(" + zone + ")";
    if (field && field.dataset.asOf) {
      const value = localInputValue(field.dataset.asOf);
      if (value) field.value = value;
    }
  }
}

setUp(document);
if (window.htmx) window.htmx.onLoad((el) => { if (el.querySelectorAll) setUp(el); });
