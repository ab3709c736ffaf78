from __future__ import annotations

from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    name = "explorer"
    verbose_name = "P-Mem explorer"
