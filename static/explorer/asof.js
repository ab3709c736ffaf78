// The "as of" control: the date-time field is in the browser's zone (sent along as tz; the
// server answers with a canonical ?as_of= in UTC), and shows the current as-of in that zone.
import { browserZone, localInputValue } from "./dates.js";

const zone = browserZone();
for (const form of document.querySelectorAll("form.as-of")) {
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
