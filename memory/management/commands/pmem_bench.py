"""``manage.py pmem_bench SCENARIO``: rerun one of the paper's experiments on this codebase."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test import override_settings

from bench import report
from bench.runners import SCENARIOS, RunConfig
from memory.llm.client import client_from_settings


def _ints(raw: str) -> tuple[int, ...]:
    return tuple(int(x.replace("_", "")) for x in raw.split(",") if x.strip())


class StderrBar:
    """A one-line progress bar on stderr (no dependency; quiet when stderr is not a terminal
    except for the final line)."""

    def __init__(self, label: str, width: int = 30) -> None:
        self.label = label
        self.width = width
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.tty and done < total:
            return
        filled = self.width * done // max(total, 1)
        elapsed = time.monotonic() - self.started
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                         f"{done}/{total} {elapsed:.0f}s")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


class Command(BaseCommand):
    help = "Run a benchmark scenario (paper §4, Appendix B) and write JSON, Markdown and PNG."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("scenario", choices=sorted(SCENARIOS))
        parser.add_argument("--cases", type=int, default=None,
                            help="cases per axis value (default 140); questions for datasets")
        parser.add_argument("--out", type=Path, default=Path("bench/out"))
        parser.add_argument("--model-url", default=None,
                            help="OpenAI-compatible endpoint for this run (overrides "
                                 "PMEM_LLM_BASE_URL): every model-backed arm runs against it")
        parser.add_argument("--model", default=None,
                            help="the model name to ask for (overrides PMEM_LLM_MODEL); results "
                                 "are labelled with it")
        parser.add_argument("--L", dest="lengths", type=_ints, default=None,
                            help="chain lengths, e.g. 1,2,4,8")
        parser.add_argument("--d", dest="distances", type=_ints, default=None,
                            help="retraction distances, e.g. 0,32")
        parser.add_argument("--sizes", type=_ints, default=None,
                            help="FactConsolidation stream sizes, e.g. 455,2310,4580,18332")
        parser.add_argument("--questions", type=int, default=None,
                            help="FactConsolidation questions per kind (default 100)")
        parser.add_argument("--dataset", type=Path, default=None,
                            help="dataset file for longmemeval / locomo / locomo_evidence")
        parser.add_argument("--scale", choices=("small", "medium", "full"), default="medium",
                            help="perf: small (minutes), medium (100k versions/cells, the "
                                 "default) or full (1M); transfer: small (10k versions, 100k"
                                 " operations) or medium (100k versions, 1M operations)")
        parser.add_argument("--only", choices=("graph", "agents"), default=None,
                            help="perf: run one section alone (graph: a cell graph's peak "
                                 "web-worker RSS; agents: MCP vs REST round trips)")
        parser.add_argument("--embedder", choices=("hashing", "minilm"), default=None,
                            help="the local embedder (default: hashing, which every table in "
                                 "bench/README.md was measured with, so they stand; recall "
                                 "runs each embedder itself)")
        parser.add_argument("--baseline", type=Path, default=None,
                            help="perf graph, throughput: a checkout of older code (same "
                                 "schema) measured beside this one")
        _throughput_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # A benchmark often runs on a fresh PMEM_DATA_DIR: bring its schema up first.
        call_command("migrate", verbosity=0, interactive=False)
        overrides: dict[str, Any] = (
            {"PMEM_LLM_BASE_URL": options["model_url"]} if options["model_url"] else {})
        if options["model"]:
            overrides["PMEM_LLM_MODEL"] = options["model"]
        if options["scenario"] != "recall":
            # LoCoMo's evidence retrieval is measured with the default (semantic) embedder.
            embedder = options["embedder"] or (
                "minilm" if options["scenario"] == "locomo_evidence" else "hashing")
            overrides["PMEM_EMBEDDER"] = embedder
            os.environ["PMEM_EMBEDDER"] = embedder  # the processes a benchmark starts
        with override_settings(**overrides):
            table = self._run(options)
        self.stdout.write(table)

    def _run(self, options: dict[str, Any]) -> str:

        scenario = options["scenario"]
        config = RunConfig(run_id=f"{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}", out=options["out"],
                           cases=options["cases"], dataset=options["dataset"],
                           client=client_from_settings(), progress=StderrBar(scenario),
                           scale=options["scale"], only=options["only"],
                           baseline=options["baseline"])
        config.throughput = {
            "latency": options["latency"], "in_flight": options["in_flight"],
            "workers": options["workers"], "model_concurrency": options["model_concurrency"],
            "observations": options["observations"], "rounds": options["rounds"],
            "turn_cases": options["turn_cases"],
            "batch_observations": options["batch_observations"],
            "streams": [s.strip() for s in options["streams"].split(",") if s.strip()],
            "namespaces": list(options["namespaces"]), "model_url": options["model_url"],
            "embedders": _embedders(options["embedders"]),
            "model": options["model"],
            "tree": str(options["tree"]) if options["tree"] else None}
        config.frontier_conversations = options["frontier_conversations"]
        config.reuse_run = options["reuse_run"]
        for name in ("lengths", "distances", "sizes"):
            if options[name]:
                setattr(config, name, options[name])
        if options["questions"]:
            config.questions = options["questions"]
        if config.cases is not None and config.cases < 1:
            raise CommandError("--cases must be at least 1")
        run_config, results = SCENARIOS[scenario](config)
        table = report.write(config.out, scenario, run_config, results)
        self.stderr.write(f"wrote {config.out / scenario}.{{json,md,png}}")
        return table


def _embedders(raw: str) -> list[str]:
    """``--embedders``: local embedders by name, each known."""
    names = [e.strip().lower() for e in raw.split(",") if e.strip()]
    unknown = [n for n in names if n not in ("hashing", "minilm")]
    if unknown:
        raise CommandError(f"--embedders: unknown embedder(s) {', '.join(unknown)} "
                           "(hashing, minilm)")
    return names


def _throughput_arguments(parser: CommandParser) -> None:
    """The options of the model-path scenarios (throughput, sessions)."""
    parser.add_argument("--latency", type=float, default=1.0,
                        help="throughput: seconds the scripted model server takes per answer")
    parser.add_argument("--in-flight", type=int, default=8,
                        help="throughput: requests the model server serves at once (the "
                             "rest queue); with --model-url, the ideal's figure")
    parser.add_argument("--workers", type=int, default=2,
                        help="throughput: Celery worker processes (PMEM_WORKERS)")
    parser.add_argument("--model-concurrency", type=int, default=8,
                        help="throughput: PMEM_MODEL_CONCURRENCY for the workers")
    parser.add_argument("--observations", type=int, default=40,
                        help="throughput: observations per stream")
    parser.add_argument("--streams", default="distinct,updates,similar",
                        help="throughput: the streams to run (distinct, updates, similar, "
                             "ids, entities)")
    parser.add_argument("--embedders", default="",
                        help="throughput: local embedders measured one after the other, "
                             "e.g. hashing,minilm (default: --embedder's alone)")
    parser.add_argument("--namespaces", type=_ints, default=(1, 8),
                        help="throughput: namespace counts a stream is split over, e.g. 1,8")
    parser.add_argument("--tree", type=Path, default=None,
                        help="throughput: measure this checkout instead of the current one "
                             "(each in a process of its own, as with --baseline)")
    parser.add_argument("--turn-cases", type=int, default=1,
                        help="sessions: conversations also ingested turn by turn")
    parser.add_argument("--batch-observations", type=int, default=2000,
                        help="sessions: observations of the batch/one-by-one comparison")
    parser.add_argument("--frontier-conversations", type=int, default=None, help=(
        "locomo_evidence: a fact per turn, read in frontier, for the first N only"))
    parser.add_argument("--reuse-run", default=None, help=(
        "locomo_evidence: score the namespaces the run of this id ingested here"))
    parser.add_argument("--rounds", type=int, default=1,
                        help="throughput with --baseline: rounds, the trees in turn; the "
                             "best of each is reported")
