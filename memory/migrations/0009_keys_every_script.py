"""Keys in every script (SPEC §1; docs/decisions.md, "Keys in every script").

The old canonical form kept only ASCII letters and digits (NFKD, then everything else
dropped), so ``電話 1`` and ``住所 1`` were both stored as ``1``, and the second superseded the
first. The new form keeps the letters, marks and numbers of every script. This migration:

1. re-normalises every stored cell key, alias and operation key with the new form. A key the
   old form wrote is already canonical in the new one (ASCII letters, digits, single ``_``), so
   for data written by the service this changes nothing; a stored key that is not canonical is
   renamed, unless another cell of its namespace already holds the new name: then both are
   left as they are and listed (they are not merged: which history wins is a person's call);
2. reads what the observations themselves called their keys (the facts a client sent, the
   ``key = value`` / ``key: value`` lines of a text, a model's raw extraction) and, for each
   stored key, compares their new forms:

   - two or more different ones (``電話_1`` and ``住所_1`` both stored as ``1``): the key
     collided. Its versions cannot be told apart after the fact, so it is kept as it is and
     listed; new observations go to the new, separate keys;
   - exactly one, different from the stored key (``電話_1`` stored as ``1``, ``café`` as
     ``cafe``): that name becomes an alias of the cell, so the next observation under the same
     name reaches the same cell instead of starting a new one.

Everything it did is printed (the output of ``manage.py migrate``). The normalisations are
frozen here: a later change of the live one must not change what this migration did.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import defaultdict
from typing import Any

from django.db import migrations

CANONICAL_OLD = r"^[a-z0-9]+(_[a-z0-9]+)*$"  # every key the old form can write
KEY_MAX_CHARS = 255
_ASCII_JUNK = re.compile(r"[^0-9a-z]+")
_LIST_MARKER = re.compile(r"^\s*[-*•]\s+")
_KEY_WORD = re.compile(r"^[^\W_]?[\w .\-/']*$")
_NON_ASCII = r"[^\x01-\x7f]"
_BATCH = 1000


def old_key(raw: str) -> str:
    folded = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode().lower()
    return _ASCII_JUNK.sub("_", folded).strip("_")


def new_key(raw: str) -> str:
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", raw).casefold())
    out: list[str] = []
    gap = False
    for ch in folded:
        if unicodedata.category(ch)[0] in "LMN":
            if gap and out:
                out.append("_")
            out.append(ch)
            gap = False
        else:
            gap = True
    return "".join(out)


def _line_key(line: str) -> str | None:
    """The key of a ``key = value`` / ``key: value`` line, as the rule extractor read it (a
    scan: the first '=' or ':' ends the key)."""
    line = _LIST_MARKER.sub("", line, count=1).strip()
    cut = next((i for i, ch in enumerate(line) if ch in "=:"), -1)
    if cut <= 0:
        return None
    key, value = line[:cut].strip(), line[cut + 1 :].strip()
    if not value or (line[cut] == ":" and value.startswith("//")) or key.endswith("."):
        return None
    if len(key.split()) > 8 or not _KEY_WORD.match(key) or not any(c.isalpha() for c in key):
        return None
    return key


def _raw_keys(text: str, facts: Any, model_output: str | None) -> set[str]:
    keys = {str(f["key"]) for f in facts or [] if isinstance(f, dict) and f.get("key")}
    keys |= {k for line in (text or "").splitlines() if (k := _line_key(line))}
    if model_output:
        try:
            parsed = json.loads(model_output)
        except ValueError:
            parsed = None
        facts_out = parsed.get("facts") if isinstance(parsed, dict) else None
        keys |= {str(f["key"]) for f in facts_out or [] if isinstance(f, dict) and f.get("key")}
    return keys


class _Report:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        self.lines.append(line)

    def print(self) -> None:
        if self.lines:
            print("\n  0009_keys_every_script:")
            for line in self.lines:
                print(f"    {line}")


def _renormalise_cells(apps: Any, report: _Report) -> None:
    Cell = apps.get_model("memory", "Cell")
    Operation = apps.get_model("memory", "Operation")
    for cell in Cell.objects.exclude(key__regex=CANONICAL_OLD).select_related("namespace"):
        canonical = new_key(cell.key)
        if canonical == cell.key:
            continue
        where = f"{cell.namespace.name}/{cell.key}"
        if not canonical or len(canonical) > KEY_MAX_CHARS:
            report.add(f"kept {where}: it has no canonical form (nothing left, or too long)")
        elif Cell.objects.filter(namespace_id=cell.namespace_id, key=canonical).exists():
            report.add(f"left apart: {where} and {cell.namespace.name}/{canonical} now name "
                       "the same key; merge them by hand")
        else:
            Cell.objects.filter(pk=cell.pk).update(key=canonical)
            Operation.objects.filter(cell_id=cell.pk).update(key=canonical)
            report.add(f"renamed {where} -> {canonical}")


def _renormalise_aliases(apps: Any, report: _Report) -> None:
    Cell = apps.get_model("memory", "Cell")
    KeyAlias = apps.get_model("memory", "KeyAlias")
    for alias in KeyAlias.objects.exclude(alias__regex=CANONICAL_OLD).select_related("namespace"):
        canonical = new_key(alias.alias)
        if canonical == alias.alias:
            continue
        taken = (KeyAlias.objects.filter(namespace_id=alias.namespace_id, alias=canonical).exists()
                 or Cell.objects.filter(namespace_id=alias.namespace_id, key=canonical).exists())
        where = f"{alias.namespace.name}/{alias.alias}"
        if not canonical or len(canonical) > KEY_MAX_CHARS or taken:
            report.add(f"kept alias {where}: its canonical form is empty or taken")
        else:
            KeyAlias.objects.filter(pk=alias.pk).update(alias=canonical)
            report.add(f"renamed alias {where} -> {canonical}")


def _renormalise_loose_operations(apps: Any) -> None:
    """Operations without a cell (refused ones) carry the key they named: re-normalise it."""
    Operation = apps.get_model("memory", "Operation")
    for op in Operation.objects.filter(cell__isnull=True).exclude(key__regex=CANONICAL_OLD):
        canonical = new_key(op.key)
        if canonical and canonical != op.key and len(canonical) <= KEY_MAX_CHARS:
            Operation.objects.filter(pk=op.pk).update(key=canonical)


def _spellings(apps: Any) -> dict[tuple[int, str], set[str]]:
    """(namespace, old canonical key) -> the new canonical forms of what observations called
    it. Only observations with a non-ASCII character are read: for ASCII both forms agree."""
    Evidence = apps.get_model("memory", "Evidence")
    found: dict[tuple[int, str], set[str]] = defaultdict(set)
    last = 0
    while True:  # keyset pages: the table may be large
        rows = list(Evidence.objects.filter(id__gt=last).extra(
            where=["(text ~ %s OR facts::text ~ %s OR extracted->>'raw' ~ %s)"],
            params=[_NON_ASCII] * 3).order_by("id")
            .values_list("id", "namespace_id", "text", "facts", "extracted")[:_BATCH])
        if not rows:
            return found
        for _, namespace_id, text, facts, extracted in rows:
            raw = (extracted or {}).get("raw") if isinstance(extracted, dict) else None
            for key in _raw_keys(text, facts, raw if isinstance(raw, str) else None):
                old, new = old_key(key), new_key(key)
                if old and new:
                    found[(namespace_id, old)].add(new)
        last = rows[-1][0]


def _collisions_and_aliases(apps: Any, report: _Report) -> None:
    Cell = apps.get_model("memory", "Cell")
    KeyAlias = apps.get_model("memory", "KeyAlias")
    for (namespace_id, old), news in sorted(_spellings(apps).items()):
        cell = (Cell.objects.filter(namespace_id=namespace_id, key=old)
                .select_related("namespace").first())
        if cell is None or news == {old}:
            continue
        where = f"{cell.namespace.name}/{old}"
        if len(news) > 1:
            report.add(f"collided: {where} holds the values of {', '.join(sorted(news))}; "
                       "kept as it is (its versions cannot be told apart)")
            continue
        [new] = news
        taken = (Cell.objects.filter(namespace_id=namespace_id, key=new).exists()
                 or KeyAlias.objects.filter(namespace_id=namespace_id, alias=new).exists())
        if taken or len(new) > KEY_MAX_CHARS:
            report.add(f"not aliased: {new} -> {where} ({new} is taken)")
        else:
            KeyAlias.objects.create(namespace_id=namespace_id, cell_id=cell.pk, alias=new)
            report.add(f"alias {new} -> {where} (the name its observations used)")


def forwards(apps: Any, schema_editor: Any) -> list[str]:
    report = _Report()
    _renormalise_cells(apps, report)
    _renormalise_aliases(apps, report)
    _renormalise_loose_operations(apps)
    _collisions_and_aliases(apps, report)
    report.print()
    return report.lines


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0008_erase_redaction'),
    ]

    operations = [
        # Backwards: nothing to undo that the old form would not redo (keys stay as they are).
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
    ]
