"""The write path through a real worker against a server that, like llama-cpp-python's, takes
a schema only as ``json_object``: observations commit, the refused form costs one call per
worker process, not one per task; a model answering 4xx fails the observation with the reason
and the namespace keeps committing."""

from __future__ import annotations

import pytest

from memory.models import Operation
from tests.support.scripted_llm import Fault, ScriptedLLM
from tests.tasks.helpers import assert_memory_consistent, heads, reload, settle, submit, told

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_llama_cpp_style_server_is_negotiated_once_per_process(celery_worker_proc, ns):
    with ScriptedLLM(formats={"json_object"}) as server:
        worker = celery_worker_proc(llm=server, concurrency=1)
        texts = [told(f"mug_location = place {i}\ncolor = c{i}") for i in range(1, 5)]
        assert settle(submit(ns, *texts), worker, timeout=60) == ["committed"] * 4
        assert heads(ns) == {"mug_location": "place 4", "color": "c4"}
        # One refused json_schema call for the (single) worker process, then json_object.
        assert server.forms.count("json_schema") == 1
        assert set(server.forms) - {"json_schema"} <= {"json_object", "prompt"}
        # Every extraction fails until the observation has failed, however many tries the
        # client's and the task's retries (and a drain extracting it itself) make of it.
        server.push(Fault.HTTP(404), job="extraction", times=1000)
        [failed] = submit(ns, told("mug_location = shelf"))
        assert settle([failed], worker, timeout=60) == ["failed"]
        server.clear_faults()
        [later] = submit(ns, told("size = large"))
        assert settle([later], worker, timeout=60) == ["committed"]
        assert reload(failed).error.startswith("extraction failed: http 404")
        assert not Operation.objects.filter(evidence=failed).exists()
        assert heads(ns)["size"] == "large" and heads(ns)["mug_location"] == "place 4"
        assert_memory_consistent(ns)
