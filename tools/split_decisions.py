"""Split ``docs/decisions.md``'s numbered list into one file per decision under ``docs/decisions/``.

``python tools/split_decisions.py`` reads every entry still in ``docs/decisions.md`` (a line
``N. **Title** …`` and its indented continuation), writes ``docs/decisions/NNNN-slug.md`` for
each (the number kept as it was: decisions are cited by number, so one is never renumbered),
rewrites ``docs/decisions/README.md`` (the index, from every file there, old and new) and
leaves ``docs/decisions.md`` a short pointer to it. Rerunning it is safe: an entry added to
``docs/decisions.md`` since (by a branch written before the split) becomes its own file, and an
entry whose file exists is left as the file says (``--rewrite`` writes it again from the list).

A decision that replaces an earlier one says so in its text (``Supersedes decision N``, or
``supersedes N``); the earlier file is then marked ``Superseded by NNNN`` — a decision file
is amended by a new decision, never rewritten. ``--check`` writes nothing and exits 1 when
``docs/decisions.md`` still holds entries that are not split.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "decisions.md"
FOLDER = ROOT / "docs" / "decisions"
INDEX = FOLDER / "README.md"

ENTRY = re.compile(r"^(\d+)\. (.*)$")
TITLE = re.compile(r"^\*\*(.+?)\*\*")
SUPERSEDES = re.compile(r"\b[Ss]upersedes (?:decision )?(\d+)\b")
STATUS = re.compile(r"^Status: (.*)$", re.M)
FILE = re.compile(r"^(\d{4})-[a-z0-9-]+\.md$")
CITED = re.compile(r"\b([Dd]ecision) (\d+)\b(?!\])")

INTRO = """\
# Decisions where SPEC.md is silent

One file per decision, numbered as it was first written (numbers are never reused or changed,
so some are missing). Each is tested; the test names are given in it. A decision that a
later one replaces is marked *Superseded by NNNN* and kept as it was.

Adding one: write `NNNN-slug.md` with the next free number (the highest here plus one), the
title as its heading and `Status: Accepted`, and add its line below (or write it into
`docs/decisions.md` and run `python tools/split_decisions.py`, which does both).
"""

POINTER = """\
# Decisions

The decisions where SPEC.md is silent are one file each in [decisions/](decisions/README.md).
"""


@dataclass
class Decision:
    number: int
    title: str
    body: str  # markdown, dedented, starting with the bold title as the list item did

    @property
    def slug(self) -> str:
        words = re.sub(r"[^a-z0-9]+", "-", re.sub(r"[`*]", "", self.title.lower())).strip("-")
        cut = words[:60]
        return cut.rsplit("-", 1)[0] if len(words) > 60 and "-" in cut else cut or "decision"

    @property
    def name(self) -> str:
        return f"{self.number:04d}-{self.slug}.md"


def parse(text: str) -> list[Decision]:
    """The numbered entries of ``text``, in the order written."""
    entries: list[tuple[int, list[str]]] = []
    for line in text.splitlines():
        match = ENTRY.match(line)
        if match:
            entries.append((int(match.group(1)), [match.group(2)]))
        elif entries and (line.startswith(" ") or not line.strip()):
            entries[-1][1].append(line)
        elif entries:  # a heading or paragraph of its own ends the list item
            entries[-1][1].append("")
    decisions = []
    for number, lines in entries:
        body = lines[0] + "\n" + textwrap.dedent("\n".join(lines[1:]))
        title = TITLE.match(lines[0])
        heading = title.group(1) if title else lines[0][:80]
        decisions.append(Decision(number, re.sub(r"[:.]$", "", heading.strip()), body.strip()))
    return decisions


def existing() -> dict[int, Path]:
    found = {}
    for path in FOLDER.glob("*.md"):
        match = FILE.match(path.name)
        if match:
            found[int(match.group(1))] = path
    return found


def linked(body: str, names: dict[int, str]) -> str:
    """``decision N`` in a decision's text, as a link to N's file."""
    def link(match: re.Match[str]) -> str:
        number = int(match.group(2))
        return f"[{match.group(0)}]({names[number]})" if number in names else match.group(0)
    return CITED.sub(link, body)


def write(decisions: list[Decision], *, rewrite: bool = False) -> int:
    FOLDER.mkdir(exist_ok=True)
    files = existing()
    for d in decisions:
        old = files.get(d.number)
        if old is None:
            files[d.number] = FOLDER / d.name
        elif rewrite and old.name != d.name:  # written again with a new title: the new name
            old.unlink()
            files[d.number] = FOLDER / d.name
    names = {n: p.name for n, p in files.items()}
    superseded = {int(m.group(1)): d.number for d in decisions
                  for m in SUPERSEDES.finditer(d.body) if int(m.group(1)) != d.number}
    written = 0
    for d in decisions:
        path = files[d.number]
        if path.exists() and not rewrite:  # split already: the file is the decision now
            continue
        written += 1
        status = "Accepted"
        if path.exists():  # a mark a later decision left stays
            kept = STATUS.search(path.read_text())
            status = kept.group(1) if kept else status
        path.write_text(
            f"# {d.number}. {d.title}\n\nStatus: {status}\n\n{linked(d.body, names)}\n")
    for old, new in superseded.items():
        path = files.get(old)
        if path is not None:
            text = path.read_text()
            mark = f"Superseded by [{new:04d}]({names[new]})"
            path.write_text(STATUS.sub(f"Status: {mark}", text, count=1))
    index()
    SOURCE.write_text(POINTER)
    return written


def index() -> None:
    lines = [INTRO]
    for number, path in sorted(existing().items()):
        text = path.read_text()
        heading = text.splitlines()[0].removeprefix("# ").split(". ", 1)[-1]
        status = STATUS.search(text)
        note = "" if status is None or status.group(1) == "Accepted" else f" — {status.group(1)}"
        lines.append(f"- [{number:04d}]({path.name}) {heading}{note}")
    INDEX.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rewrite", action="store_true",
                        help="write again the files of entries split before (their edits lost)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when docs/decisions.md still holds entries not split")
    args = parser.parse_args()
    decisions = parse(SOURCE.read_text()) if SOURCE.exists() else []
    if args.check:
        if decisions:
            print(f"docs/decisions.md holds {len(decisions)} entries: run "
                  "python tools/split_decisions.py", file=sys.stderr)
            return 1
        return 0
    numbers = [d.number for d in decisions]
    twice = sorted({n for n in numbers if numbers.count(n) > 1})
    if twice:
        print(f"numbered twice in docs/decisions.md: {twice}", file=sys.stderr)
        return 1
    written = write(decisions, rewrite=args.rewrite)
    print(f"{written} of {len(decisions)} decisions written under {FOLDER.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
