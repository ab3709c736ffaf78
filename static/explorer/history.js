// The cell page's history table: each row expands (button, Enter/Space, or a tap anywhere on
// the row) to why the version exists — its operations, evidence, source, actor and reason,
// loaded once by htmx. A #v12 in the URL (the key's 12th version) opens that row. It mirrors
// the graph: the version selected there is marked here (pmem-select events), and a version
// link here selects its node there and shows its details (pmem-focus events, which move the
// graph's window when the version lies outside it).

export function historyTable() {
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

  // "Retract this version…" in a row's details: the retract form, with that version found
  // and chosen (whether or not it is among the newest the form lists).
  let retracting = null;
  document.addEventListener("click", (event) => {
    const b = event.target.closest && event.target.closest("button[data-retract]");
    if (!b) return;
    const action = document.querySelector("details.action[data-op='revoke']");
    const search = document.getElementById("revoke-search");
    if (!action || !search) return;
    action.open = true;
    retracting = b.dataset.retract;
    search.value = b.dataset.retractName;
    window.htmx.trigger(search, "search");
    action.scrollIntoView({ block: "nearest", behavior: "smooth" });
  });
  document.body.addEventListener("htmx:afterSwap", (event) => {
    if (!retracting || !event.target || event.target.id !== "revoke-choices") return;
    const radio = event.target.querySelector("input[type=radio][value='" + retracting + "']");
    if (radio) {
      radio.checked = true;
      document.getElementById("revoke-reason")?.focus();
    }
    retracting = null;
  });

  // Copies of a value that was retracted and restored again fold under its newest version;
  // "N earlier copies" shows them (a row named in the URL or chosen elsewhere shows itself).
  function showCopies(button, open) {
    const now = open ?? button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", now ? "true" : "false");
    for (const ordinal of (button.dataset.copies || "").split(" ")) {
      const row = ordinal && document.getElementById("v" + ordinal);
      if (row) row.hidden = !now;
    }
  }
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("button.show-copies");
    if (button) showCopies(button);
  });
  function unfold(tr) {
    if (!tr || !tr.hidden || !tr.dataset.foldedUnder) return;
    const button = document.querySelector("#v" + tr.dataset.foldedUnder + " button.show-copies");
    if (button) showCopies(button, true);
    else tr.hidden = false;
  }

  function openFromHash() {
    const m = /^#v(\d+)$/.exec(location.hash);
    if (!m) return;
    const tr = document.getElementById("v" + m[1]);
    unfold(tr);
    const button = tr && tr.querySelector("button.expand");
    if (button && button.getAttribute("aria-expanded") !== "true") button.click();
  }

  // After htmx swaps a new page of history in, the row named in the URL opens again.
  document.body.addEventListener("htmx:afterSwap", (event) => {
    if (event.target && event.target.id === "cell-history") openFromHash();
  });
  window.addEventListener("hashchange", openFromHash);
  openFromHash();

  // The version chosen in the graph (a node, a timeline bar, a jump) is marked in the list;
  // when this page of the list does not hold it, the list moves to the page that starts at it.
  let chosen = null;
  function mark() {
    for (const tr of document.querySelectorAll("table.history tr.selected")) tr.classList.remove("selected");
    const tr = chosen ? document.querySelector("table.history tr[data-version='" + chosen.version + "']") : null;
    unfold(tr);
    if (tr) tr.classList.add("selected");
    return tr;
  }
  document.addEventListener("pmem-select", (event) => {
    const d = event.detail || {};
    chosen = d.version ? d : null;
    const list = document.getElementById("cell-history");
    if (mark() || !chosen || !chosen.ordinal || !list || !list.dataset.followUrl) return;
    const url = list.dataset.followUrl + (list.dataset.followUrl.includes("?") ? "&" : "?")
      + "before=" + list.dataset.cursorKey + "-" + (chosen.ordinal + 1);
    window.htmx.ajax("GET", url, { target: "#cell-history", swap: "outerHTML" });
  });
  document.body.addEventListener("htmx:afterSwap", (event) => {
    if (event.target && event.target.id === "cell-history") mark();
  });

  document.addEventListener("click", (event) => {
    const a = event.target.closest && event.target.closest("a.vlink");
    if (!a) return;
    const id = a.getAttribute("href").slice(1);
    // The graph takes the focus when it is drawn (it cancels the event); without it the
    // link is a plain #v<id>, which opens the row.
    const focus = new CustomEvent("pmem-focus", { detail: { id }, cancelable: true });
    if (document.dispatchEvent(focus)) return;
    event.preventDefault();
    history.replaceState(history.state, "", location.pathname + location.search + "#" + id);
  });
}
