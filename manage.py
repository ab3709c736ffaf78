#!/usr/bin/env python
"""Django's command-line utility for P-Mem."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmem_site.settings")
    from django.core.management import execute_from_command_line

    from pmem_site import embedded

    # The embedded PostgreSQL and Redis (unless DATABASE_URL / REDIS_URL point elsewhere):
    # started here, or joined when `make run` already runs them.
    embedded.start()

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
