// The cell page's history table: each row expands (button, Enter/Space, or a tap anywhere on
// the row) to why the version exists — its operations, evidence, source, actor and reason,
// loaded once by htmx. A #v<id> in the URL opens that row.
"use strict";

(function () {
  function toggle(button, open) {
    const target = document.getElementById(button.getAttribute("aria-controls"));
    if (!target) return;
    const now = open ?? button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", now ? "true" : "false");
    target.hidden = !now;
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button.expand");
    if (button) {
      toggle(button);
      return;
    }
    // A tap on the row (not on a link, a button or selected text) does the same.
    const tr = event.target.closest("table.history tr[data-version]");
    if (!tr || event.target.closest("a, button, input, label") || String(window.getSelection()).length) return;
    const b = tr.querySelector("button.expand");
    if (b) b.click();
  });

  function openFromHash() {
    const m = /^#v(\d+)$/.exec(location.hash);
    if (!m) return;
    const tr = document.getElementById("v" + m[1]);
    const button = tr && tr.querySelector("button.expand");
    if (button && button.getAttribute("aria-expanded") !== "true") button.click();
  }

  // After htmx swaps a new page of history in, the row named in the URL opens again.
  document.body.addEventListener("htmx:afterSwap", (event) => {
    if (event.target && event.target.id === "cell-history") openFromHash();
  });
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
})();
