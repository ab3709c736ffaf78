// The "as of" control: the date-time field is in the browser's zone (sent along as tz; the
// server answers with a canonical ?as_of= in UTC), and shows the current as-of in that zone.
"use strict";

(function () {
  let zone = "UTC";
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch (e) { /* keep UTC */ }
  const pad = (n) => String(n).padStart(2, "0");
  for (const form of document.querySelectorAll("form.as-of")) {
    const tz = form.querySelector("[data-browser-zone]");
    const label = form.querySelector("[data-zone-label]");
    const field = form.querySelector("input[type=datetime-local]");
    if (tz) tz.value = zone;
    if (label) label.textContent = "(" + zone + ")";
    if (field && field.dataset.asOf) {
      const d = new Date(field.dataset.asOf);
      if (!isNaN(d)) {
        field.value = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T"
          + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
      }
    }
  }
})();
