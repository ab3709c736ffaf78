"""``pmem_bench throughput``: its scripted model server, its streams, and the invariants of its
report at a tiny size (every observation committed, the calls counted on both sides equal, the
ratio as defined); never a wall-clock figure."""

from __future__ import annotations

import json
import threading
from io import StringIO

import pytest
import requests
from django.core.management import call_command

from bench.slow_model import SlowModel, annotation_answer, extraction_answer, identity_answer
from bench.throughput import FIRST_LINE, UPDATE_GAP, expected_heads, keys_of, make_stream, repeats
from memory.domain.keyrule import same_by_rule


def _chat(srv: SlowModel, system: str, user: str, schema: str | None = None) -> str:
    body: dict = {"model": "m", "messages": [{"role": "system", "content": system},
                                             {"role": "user", "content": user}]}
    if schema:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": schema, "schema": {}}}
    answer = requests.post(f"{srv.base_url}/chat/completions", json=body, timeout=10)
    answer.raise_for_status()
    assert answer.json()["usage"]["prompt_tokens"] == len(system) // 4 + len(user) // 4
    return str(answer.json()["choices"][0]["message"]["content"])


def test_extraction_classifies_against_the_memory_block_only_when_shown():
    text = f"{FIRST_LINE}\nuser_city = Lisbon\nuser_pet = Rex\nnot a fact"
    plain = extraction_answer(f"<observation>\n{text}\n</observation>")
    assert plain == {"facts": [
        {"key": "user_city", "value": "Lisbon", "assertion": "asserted"},
        {"key": "user_pet", "value": "Rex", "assertion": "asserted"}]}
    memory = json.dumps([{"key": "user_city", "value": "Porto", "status": "active"},
                         {"key": "user_pet", "value": " rex", "status": "active"}])
    shown = extraction_answer(f"<memory>\n{memory}\n</memory>\n<observation>\n{text}\n"
                              "</observation>")
    assert [(f["op"], f["old_value"]) for f in shown["facts"]] == [("accept", "Porto"),
                                                                    ("noop", " rex")]
    lines = "\n".join(json.dumps(h) for h in json.loads(memory))  # one head a line
    assert extraction_answer(f"<memory>\n{lines}\n</memory>\n<observation>\n{text}\n"
                             "</observation>") == shown
    empty = extraction_answer(f"<memory>\n\n</memory>\n<observation>\n{text}\n</observation>")
    assert [(f["op"], f["old_value"]) for f in empty["facts"]] == [("accept", None)] * 2


def test_annotation_and_both_identity_forms():
    facts = {"facts": [{"key": "a", "value": "x", "head_value": "X"},
                       {"key": "b", "value": "y", "head_value": None}]}
    ops = annotation_answer(f"<facts>\n{json.dumps(facts)}\n</facts>")["operations"]
    assert [o["op"] for o in ops] == ["noop", "accept"]
    assert identity_answer("<key_a>home_city</key_a>\n<key_b>city_home</key_b>") == "same"
    assert identity_answer("<key_a>home_city</key_a>\n<key_b>city</key_b>") == "different"
    pairs = json.dumps([{"a": "p_home_city", "b": "p_city_home"}, {"a": "p_city", "b": "p_x"}])
    assert identity_answer(f"<pairs>\n{pairs}\n</pairs>") == {"answers": ["same", "different"]}


def test_server_recognises_jobs_counts_calls_and_bounds_what_it_serves_at_once():
    with SlowModel(latency=0.1, in_flight=2) as srv:
        threads = [threading.Thread(target=_chat, args=(
            srv, "# pmem_identity\nYou decide.", "<key_a>a_b</key_a>\n<key_b>b_a</key_b>"))
            for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        content = _chat(srv, "whatever", "<observation>\nx\nk = v\n</observation>",
                        schema="pmem_extraction")
        stats = requests.get(srv.stats_url, timeout=10).json()
    assert json.loads(content)["facts"][0]["key"] == "k"
    assert stats["counts"] == {"identity": 6, "extraction": 1} and stats["chat_calls"] == 7
    assert stats["max_in_flight"] == 2 and stats["max_waiting"] >= 1
    assert stats["prompt_tokens"] > 0 and stats["completion_tokens"] > 0


def test_before_a_real_endpoint_it_forwards_counts_and_times_the_calls():
    with SlowModel(latency=0.05, in_flight=4) as upstream, \
            SlowModel(in_flight=1, upstream=upstream.base_url) as proxy:
        content = _chat(proxy, "# pmem_annotation\nChoose.", '<facts>\n{"facts": [{"key": "a", '
                        '"value": "x", "head_value": "y"}]}\n</facts>')
        models = requests.get(f"{proxy.base_url}/models", timeout=10).json()
        stats, below, where = proxy.stats(), upstream.stats(), upstream.base_url
    assert json.loads(content)["operations"][0]["op"] == "accept"
    assert models["data"][0]["id"] == "slow"
    assert stats["counts"] == below["counts"] == {"annotation": 1}
    assert stats["prompt_tokens"] == below["prompt_tokens"] > 0
    assert stats["busy_seconds"] > 0 and stats["upstream"] == where


@pytest.mark.parametrize("lanes", [1, 8])
def test_streams_have_the_shape_they_are_named_for(lanes):
    distinct, updates, similar = (make_stream(k, 40, lanes) for k in
                                  ("distinct", "updates", "similar"))
    for text in distinct + updates + similar:
        assert text.startswith(FIRST_LINE + "\n") and 1 <= text.count(" = ") <= 3
    assert repeats(distinct) == 0
    assert repeats(updates) >= (10 if lanes == 1 else 7)
    first: dict[str, int] = {}
    for i, text in enumerate(updates):
        for line in text.splitlines()[1:]:
            key = line.split(" = ")[0]
            if key in first:  # an update: far enough back, and in the same namespace
                assert i - first[key] >= UPDATE_GAP and (i - first[key]) % lanes == 0
            first.setdefault(key, i)
    words = [set(line.split(" = ")[0].split("_")[1:]) for text in similar
             for line in text.splitlines()[1:]]
    assert sum(len(w) == 1 for w in words) > 0  # a word dropped: a near but different key


@pytest.mark.parametrize("lanes", [1, 8])
def test_the_id_and_entity_streams_update_every_third_observation_in_its_namespace(lanes):
    for kind in ("ids", "entities"):
        texts = make_stream(kind, 48, lanes)
        seen: dict[str, int] = {}
        for i, text in enumerate(texts):
            [key] = keys_of(text)
            if i % 3 == 2 and i >= 3 * lanes:
                assert key in seen and (i - seen[key]) % lanes == 0
            elif i % 3 != 2:
                assert key not in seen
            seen.setdefault(key, i)
        assert repeats(texts) >= 16 - lanes
        new = list(dict.fromkeys(keys_of(t)[0] for t in texts))
        # keys of one kind of entity and attribute are told apart without the model
        words = {k: {w for w in k.split("_") if not any(c.isdigit() for c in w)} for k in new}
        assert all(same_by_rule(a, b) is False for a in new for b in new
                   if a != b and words[a] == words[b])
    assert make_stream("ids", 3, 1)[0].startswith("Item k")
    assert extraction_answer("<observation>\nItem k3f2a9c01b7e now shows shelf 5.\n"
                             "</observation>") == {"facts": [
        {"key": "k3f2a9c01b7e", "value": "shelf 5", "assertion": "asserted"}]}
    assert expected_heads(["Item k1 now shows shelf 1.", "Item k1 now shows shelf 2."], 1) == [
        {"k1": "shelf 2"}]


@pytest.mark.django_db(transaction=True)
def test_throughput_report_counts_every_call_and_commits_every_observation(tmp_path):
    out = StringIO()
    call_command("pmem_bench", "throughput", "--out", str(tmp_path), "--observations", "6",
                 "--latency", "0.05", "--streams", "updates", "--namespaces", "1,2",
                 stdout=out, stderr=StringIO())
    assert "## throughput" in out.getvalue()
    for suffix in ("json", "md", "png"):
        assert (tmp_path / f"throughput.{suffix}").stat().st_size > 0
    report = json.loads((tmp_path / "throughput.json").read_text())
    rows = report["results"]
    assert {(r["stream"], r["namespaces"]) for r in rows} == {("updates", 1), ("updates", 2)}
    for row in rows:
        assert row["committed"] == row["observations"] == 6 and row["failed"] == 0
        assert row["evidence_chat_calls"] == row["server_chat_calls"] >= 6
        assert row["server_calls_by_job"]["extraction"] == 6
        calls = row["server_chat_calls"] / 6
        assert row["ideal_obs_per_s"] == pytest.approx(8 / (calls * 0.05), rel=1e-3)
        assert row["ratio"] == pytest.approx(row["obs_per_s"] / row["ideal_obs_per_s"],
                                             rel=1e-2)
        assert 1 <= row["server_max_in_flight"] <= 8
        assert row["evidence_prompt_tokens_per_obs"] == row["server_prompt_tokens_per_obs"] > 0
        assert row["latency_p50_s"] <= row["latency_p95_s"]
        assert row["worker_rss_peak_mib"] > 0
        assert row["heads_right"] is True
        assert sum(row["calls_per_obs_by_kind"].values()) == pytest.approx(calls, abs=0.01)
