"""The timeline's time axis always has two to ``most`` ticks (static/explorer/axis.js), whatever
the span: a history written within a fraction of a second included, where a step fitting the
axis could hold a single round instant and a phone showed one label."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

AXIS = Path(__file__).resolve().parents[2] / "static" / "explorer" / "axis.js"

_SCRIPT = """
import { ticks } from %s;
const start = Date.UTC(2026, 11, 6, 8, 57, 44, 970);
const out = [];
for (let span = 2; span < 4e9; span = Math.ceil(span * 1.37)) {
  for (const offset of [0, 13, 499, 977]) {
    const a = start + offset;
    for (const most of [2, 3, 6]) {
      const t = ticks(new Date(a).toISOString(), new Date(a + span).toISOString(), most);
      out.push({ span, offset, most, count: t.length });
    }
  }
}
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
def test_the_axis_has_two_to_most_ticks_for_any_span() -> None:
    script = _SCRIPT % json.dumps(AXIS.as_uri())
    answer = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True,
                            text=True, timeout=60, check=True)
    cases = json.loads(answer.stdout)
    wrong = [c for c in cases if not 2 <= c["count"] <= c["most"]]
    assert len(cases) > 500 and not wrong, wrong[:5]
