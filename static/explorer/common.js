// Shared by every explorer page (loaded from base.html). The pages hold no inline script or
// style (the Content-Security-Policy allows neither), so their small behaviours live here.
"use strict";

// Live regions that hold forms refresh only while nobody is filling them in.
window.pmemIdle = function (id) {
  const el = document.getElementById(id);
  if (!el) return true;
  if (el.contains(document.activeElement)) return false;
  for (const field of el.querySelectorAll("input[type=text], input:not([type]), textarea")) {
    if (field.value.trim() !== "") return false;
  }
  return true;
};

// pmem-changed (the live poller's event) refreshes [data-refresh-when-idle] regions through
// a pmem-refresh event, unless someone is typing in them. (An htmx trigger filter would say
// this inline, but htmx evaluates filters with eval, which the CSP forbids.)
document.body.addEventListener("pmem-changed", function () {
  for (const el of document.querySelectorAll("[data-refresh-when-idle]")) {
    if (el.id && window.pmemIdle(el.id)) window.htmx.trigger(el, "pmem-refresh");
  }
});

// Plain forms with data-confirm ask first (htmx forms use hx-confirm).
document.addEventListener("submit", function (event) {
  const message = event.target.dataset && event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});
