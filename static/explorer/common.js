// Shared by every explorer page (loaded from base.html).
"use strict";

// Live regions that hold forms refresh only while nobody is filling them in
// (used in hx-trigger filters: pmem-changed[pmemIdle('cell-actions')]).
window.pmemIdle = function (id) {
  const el = document.getElementById(id);
  if (!el) return true;
  if (el.contains(document.activeElement)) return false;
  for (const field of el.querySelectorAll("input[type=text], input:not([type]), textarea")) {
    if (field.value.trim() !== "") return false;
  }
  return true;
};
