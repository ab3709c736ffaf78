// Shared by every explorer page (an ES module loaded from base.html). The pages hold no inline
// script or style (the Content-Security-Policy allows neither), so their small behaviours live
// here.
import { localizeTimes } from "./dates.js";

// Live regions that hold forms refresh only while nobody is filling them in.
function idle(id) {
  const el = document.getElementById(id);
  if (!el) return true;
  if (el.contains(document.activeElement)) return false;
  for (const field of el.querySelectorAll("input[type=text], input:not([type]), textarea")) {
    if (field.value.trim() !== "") return false;
  }
  // A region whose choices start unchecked (the review queue) keeps a choice being made.
  if (el.hasAttribute("data-keep-choices") && el.querySelector("input:checked")) return false;
  return true;
}

// pmem-changed (the live poller's event) refreshes [data-refresh-when-idle] regions through
// a pmem-refresh event, unless someone is typing in them. (An htmx trigger filter would say
// this inline, but htmx evaluates filters with eval, which the CSP forbids.)
document.body.addEventListener("pmem-changed", function () {
  for (const el of document.querySelectorAll("[data-refresh-when-idle]")) {
    if (el.id && idle(el.id)) window.htmx.trigger(el, "pmem-refresh");
  }
});

// A refresh asked while the region was idle may answer after someone started on it (the
// request takes a while on a busy server): its answer then does not replace what they typed
// or opened; the next change refreshes it once they are done.
document.body.addEventListener("htmx:beforeSwap", function (evt) {
  const el = evt.detail.elt;
  const cause = evt.detail.requestConfig && evt.detail.requestConfig.triggeringEvent;
  if (!el || !el.id || !el.hasAttribute("data-refresh-when-idle")) return;
  if (cause && cause.type === "pmem-refresh" && !idle(el.id)) evt.detail.shouldSwap = false;
});

// A form being filled in is not refreshed: when the current value changes under it, it says
// so (its choices and labels are those of the value it was opened on).
document.body.addEventListener("htmx:afterSwap", function () {
  const state = document.getElementById("cell-state");
  const actions = document.getElementById("cell-actions");
  if (!state || !actions) return;
  if (state.dataset.head === actions.dataset.head || actions.querySelector(".stale-warning")) return;
  const warning = document.createElement("p");
  warning.className = "stale-warning";
  warning.setAttribute("role", "alert");
  warning.setAttribute("data-testid", "stale-warning");
  warning.textContent = "The current value changed since you opened this form: check it above " +
    "before you confirm (the confirmation says what the action will do now).";
  actions.insertBefore(warning, actions.children[1] || null);
});

// Plain forms with data-confirm ask first.
document.addEventListener("submit", function (event) {
  const message = event.target.dataset && event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// What a form with data-confirm-submit is about to do, in the words of the dialog: its
// question, then the version chosen, the value typed and the reason given.
function confirmText(form) {
  const lines = [form.dataset.confirmSubmit];
  const radio = form.querySelector("input[name=version]:checked");
  const choice = radio && radio.closest("label");
  if (choice) lines.push("Version: " + choice.textContent.replace(/\s+/g, " ").trim());
  const value = form.querySelector("[name=value]");
  if (value && value.value.trim()) lines.push("Value: " + value.value.trim());
  const reason = form.querySelector("[name=reason]");
  if (reason && reason.type !== "hidden") lines.push("Reason: " + (reason.value.trim() || "(none given)"));
  return lines.join("\n");
}

// An htmx form with data-confirm-submit asks on its submission only: never for the requests
// of the fields inside it (a version search), as an inherited hx-confirm would.
document.body.addEventListener("htmx:confirm", function (event) {
  const form = event.detail.elt;
  const trigger = event.detail.triggeringEvent;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirmSubmit) return;
  if (!trigger || trigger.type !== "submit") return;
  event.preventDefault();
  const text = confirmText(form);
  const host = form.closest("[data-preview-url]");
  if (!host || !form.querySelector("input[name=op]")) {  // an observation has no outcome to tell
    if (window.confirm(text)) event.detail.issueRequest(true);
    return;
  }
  // The outcome, as the server decides it with the code that applies it (nothing written).
  const fields = new URLSearchParams();
  for (const name of ["op", "value", "version"]) {
    const field = form.querySelector("[name=" + name + "]" + (name === "version" ? ":is([type=hidden], :checked)" : ""));
    if (field && field.value) fields.set(name, field.value);
  }
  fetch(host.dataset.previewUrl + "?" + fields.toString(), { credentials: "same-origin" })
    .then((r) => (r.ok ? r.text() : ""))
    .catch(() => "")
    .then((outcome) => {
      const full = outcome ? text + "\n\n" + outcome : text;
      if (window.confirm(full)) event.detail.issueRequest(true);
    });
});

// --- long values: clamped to a few lines with a "Show all" toggle ----------------------------
const LONG_CHARS = 280;
const CLAMPED = "[data-clamp], .current-value, .grid td.value, .observation-text, .details dd";

function clamp(root) {
  for (const el of (root || document).querySelectorAll(CLAMPED)) {
    if (el.dataset.clampDone || el.textContent.trim().length <= LONG_CHARS) continue;
    el.dataset.clampDone = "1";
    el.classList.add("is-long", "clamped");
    if (el.scrollHeight <= el.clientHeight + 2) { el.classList.remove("clamped"); continue; }
    const button = document.createElement("button");
    button.type = "button";
    button.className = "show-all small";
    button.textContent = "Show all";
    button.setAttribute("aria-expanded", "false");
    button.addEventListener("click", function () {
      const open = el.classList.toggle("clamped") === false;
      button.textContent = open ? "Show less" : "Show all";
      button.setAttribute("aria-expanded", String(open));
    });
    el.insertAdjacentElement("afterend", button);
  }
}

// --- tables: each cell carries its column's name, so below 640 px a row reads as a card -----
function cardLabels(root) {
  for (const table of (root || document).querySelectorAll("table.grid")) {
    const heads = Array.from(table.querySelectorAll("thead th")).map((th) => th.textContent.trim());
    if (!heads.length) continue;
    for (const row of table.querySelectorAll("tbody tr")) {
      Array.from(row.children).forEach(function (cell, i) {
        if (!cell.hasAttribute("data-label") && heads[i]) cell.setAttribute("data-label", heads[i]);
      });
    }
  }
}

function enhance(root) {
  localizeTimes(root);
  cardLabels(root);
  clamp(root);
}

// --- focus: after an action, focus moves to what it updated ----------------------------------
// Only for what a person did (a form sent, a link or button pressed), never for the live
// refreshes, and never away from a search box being typed in.
let pendingFocus = null;

document.body.addEventListener("htmx:beforeRequest", function (event) {
  const trigger = event.detail.requestConfig && event.detail.requestConfig.triggeringEvent;
  const elt = event.detail.elt;
  const type = trigger ? trigger.type : "";
  if ((type === "submit" || type === "click") && !elt.closest("[role=search]")) {
    pendingFocus = {
      elt: elt,
      target: event.detail.target ? event.detail.target.id : "",
      key: (trigger.target && trigger.target.closest && trigger.target.closest("[data-focus-key]"))
        ? trigger.target.closest("[data-focus-key]").dataset.focusKey : "",
    };
  }
  // Other requests (the live refreshes an action sets off) leave the pending focus alone:
  // afterSettle only answers the request that was pressed.
});

document.body.addEventListener("htmx:afterSettle", function (event) {
  const config = event.detail.requestConfig;
  if (!pendingFocus || !config || config.elt !== pendingFocus.elt) return;
  const wanted = pendingFocus;
  pendingFocus = null;
  let el = wanted.key ? document.querySelector('[data-focus-key="' + CSS.escape(wanted.key) + '"]') : null;
  const region = wanted.target ? document.getElementById(wanted.target) : null;
  if (!el && region) {
    el = region.querySelector(".flash, [role=alert], [role=status]") || region;
  }
  if (!el) return;
  if (!el.matches("a[href], button, input, select, textarea, [tabindex]")) el.setAttribute("tabindex", "-1");
  el.focus({ preventScroll: false });
});

// A page that answers a plain form (no htmx) with a message or a field error: focus goes to the
// message, or to the first field to correct, unless the page asks for another focus.
function focusOutcome() {
  if (document.activeElement && document.activeElement !== document.body) return;
  if (document.querySelector("[autofocus]")) return;
  const message = document.querySelector("main .flash, main [role=alert]");
  if (message) {
    message.setAttribute("tabindex", "-1");
    message.focus();
    return;
  }
  const error = document.querySelector("main .error-text");
  if (!error) return;
  const field = error.previousElementSibling;
  if (field && field.matches("input, select, textarea")) field.focus();
}

if (window.htmx) window.htmx.onLoad(enhance);
// A module runs once the document is parsed, before DOMContentLoaded.
document.addEventListener("DOMContentLoaded", function () { enhance(document); focusOutcome(); });
