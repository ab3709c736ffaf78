"""``PMEM_LOG_FORMAT=json``: one JSON object a line, for a log shipper (Loki, Elasticsearch,
CloudWatch). The fields are fixed: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``,
``process``, ``thread``, and ``exc`` (the traceback) when there is one; extra fields a call
passes (``log.info(..., extra={"evidence_id": 3})``) follow under their own names."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
            "thread": record.threadName,
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        for name, value in record.__dict__.items():
            if name not in _STANDARD and name not in out:
                out[name] = value if isinstance(value, str | int | float | bool) else repr(value)
        return json.dumps(out, ensure_ascii=False)
