"""``manage.py pmem_erase_compact``: rewrite the tables a privacy erase touches (VACUUM FULL,
one table at a time), so that the erased bytes leave the table files now rather than when
PostgreSQL happens to reuse the space (README, "Privacy erase": what stays on disk)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memory.services.erase import ERASE_TABLES, erase_rewrite


class Command(BaseCommand):
    help = ("Rewrite the tables a privacy erase touches (VACUUM FULL, each table locked while"
            " it is rewritten), so that erased values leave the table files.")

    def handle(self, *args: Any, **options: Any) -> None:
        for table in ERASE_TABLES:
            erase_rewrite([table])
            self.stdout.write(f"rewrote {table}")
