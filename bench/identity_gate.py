"""Soft key identity's gate, calibrated per embedder (SPEC §5.3; docs/identity.md).

The paper's 0.72 was measured for its embedder. This measures, for each embedder, the cosine
between the two names of every labelled key pair (:mod:`bench.identity_pairs`: LoCoMo and
FactConsolidation vocabularies and id-style keys), per kind, and for each threshold the share of
same-attribute pairs that reach the model (recall: below the gate, a paraphrase is a new key,
a fork) and of different-attribute pairs the pre-check cannot tell apart that reach it too
(wasted calls). Identifier variants are shown beside them: the pre-check decides them before
the gate matters.

The chosen threshold per embedder: the highest with ≥ 95% of the same-attribute pairs
reaching the model; where no threshold below 0.5 gets there (a lexical embedder: a paraphrase
in other words scores low at any gate), the one where recall minus the share of wasted calls
is highest.

``python -m bench.identity_gate --out DIR [--embed-url URL --embed-model NAME]`` writes
``identity-gate.json`` and ``identity-gate.png`` to DIR (default ``bench/out``); an endpoint
is measured as ``openai:<model>`` beside the local embedders.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .identity_pairs import OUT as PAIRS_FILE

SAME = ("paraphrase", "same_id_paraphrase")
UNDECIDED_DIFFERENT = ("different_attribute",)
KINDS = (*SAME, "different_attribute", "id_variant")
GRID = [round(t, 2) for t in np.arange(0.30, 0.96, 0.01)]
RECALL_GOAL = 0.95


def _embedders(embed_url: str | None, embed_model: str | None) -> list[Any]:
    from memory.llm.embedding import HashingEmbedder, MiniLMEmbedder

    found: list[Any] = [HashingEmbedder(), MiniLMEmbedder()]
    if embed_url:
        from django.test import override_settings

        from memory.llm.embedding import build_embedder

        with override_settings(PMEM_EMBED_BASE_URL=embed_url, PMEM_EMBED_MODEL=embed_model or ""):
            found.append(build_embedder())
    return found


def cosines(embedder: Any, pairs: list[dict[str, Any]]) -> np.ndarray:
    from memory.domain import normalize_key
    from memory.domain.render import key_text

    a = np.asarray(embedder.embed([key_text(normalize_key(p["a"])) for p in pairs]))
    b = np.asarray(embedder.embed([key_text(normalize_key(p["b"])) for p in pairs]))
    return np.asarray((a * b).sum(axis=1))


def choose(same: np.ndarray, wasted: np.ndarray) -> tuple[float, str]:
    """The threshold and the reason it was chosen (the module's rule)."""
    reaching = [t for t in GRID if (same >= t).mean() >= RECALL_GOAL]
    if reaching and max(reaching) >= 0.5:
        return max(reaching), f"highest with >= {RECALL_GOAL:.0%} of same-attribute pairs asked"
    best = max(GRID, key=lambda t: ((same >= t).mean() - (wasted >= t).mean(), t))
    return best, "recall minus wasted calls highest (no gate >= 0.5 keeps 95% recall)"


def measure(pairs: list[dict[str, Any]], embedders: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"pairs": len(pairs), "kinds": {k: sum(p["kind"] == k for p in pairs)
                                                           for k in KINDS}, "embedders": {}}
    for embedder in embedders:
        cos = cosines(embedder, pairs)
        by_kind = {k: cos[[i for i, p in enumerate(pairs) if p["kind"] == k]] for k in KINDS}
        same = np.concatenate([by_kind[k] for k in SAME])
        wasted = np.concatenate([by_kind[k] for k in UNDECIDED_DIFFERENT])
        chosen, why = choose(same, wasted)
        out["embedders"][embedder.name] = {
            "quantiles": {k: {q: round(float(np.quantile(v, float(q))), 3)
                              for q in ("0.05", "0.25", "0.5", "0.75", "0.95")}
                          for k, v in by_kind.items()},
            "cosines": {k: [round(float(x), 4) for x in v] for k, v in by_kind.items()},
            "by_threshold": [{"threshold": t, "same_asked": round(float((same >= t).mean()), 3),
                              "different_asked": round(float((wasted >= t).mean()), 3),
                              "id_variants_above": round(float((by_kind["id_variant"] >= t)
                                                               .mean()), 3)}
                             for t in GRID],
            "chosen": chosen, "why": why,
            "at_chosen": {"same_asked": round(float((same >= chosen).mean()), 3),
                          "different_asked": round(float((wasted >= chosen).mean()), 3)},
            "at_0.72": {"same_asked": round(float((same >= 0.72).mean()), 3),
                        "different_asked": round(float((wasted >= 0.72).mean()), 3)},
        }
    return out


def plot(path: Path, result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["embedders"])
    fig, axes = plt.subplots(2, len(names), figsize=(5.5 * len(names), 7.5), squeeze=False)
    bins = np.linspace(-0.2, 1.0, 49)
    for col, name in enumerate(names):
        got = result["embedders"][name]
        top, bottom = axes[0][col], axes[1][col]
        for kind in KINDS:
            top.hist(got["cosines"][kind], bins=bins, histtype="step", linewidth=1.6,
                     label=f"{kind} ({len(got['cosines'][kind])})")
        rows = got["by_threshold"]
        grid = [r["threshold"] for r in rows]
        bottom.plot(grid, [r["same_asked"] for r in rows], label="same attribute: asked")
        bottom.plot(grid, [r["different_asked"] for r in rows],
                    label="different, no id apart: asked (wasted)")
        bottom.plot(grid, [r["id_variants_above"] for r in rows], linestyle=":",
                    label="id variants above the gate (the rule decides them)")
        for ax in (top, bottom):
            ax.axvline(got["chosen"], color="black", linewidth=1)
            ax.axvline(0.72, color="grey", linewidth=1, linestyle="--")
        top.set_title(f"{name}: chosen {got['chosen']:.2f} (dashed: the paper's 0.72)")
        top.set_xlabel("cosine of the two key names")
        bottom.set_xlabel("threshold")
        bottom.set_ylabel("share of pairs")
        top.legend(fontsize=7)
        bottom.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/out")
    parser.add_argument("--pairs", default=str(PAIRS_FILE))
    parser.add_argument("--embed-url", default=None)
    parser.add_argument("--embed-model", default=None)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    import django

    django.setup()
    pairs = json.loads(Path(args.pairs).read_text())
    result = measure(pairs, _embedders(args.embed_url, args.embed_model))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "identity-gate.json").write_text(json.dumps(result, indent=1))
    plot(out / "identity-gate.png", result)
    for name, got in result["embedders"].items():
        print(f"{name}: chosen {got['chosen']:.2f} ({got['why']}); at it {got['at_chosen']}; "
              f"at 0.72 {got['at_0.72']}")
    print(f"wrote {out / 'identity-gate.json'} and {out / 'identity-gate.png'}")


if __name__ == "__main__":
    main()
