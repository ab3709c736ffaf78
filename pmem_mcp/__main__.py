from __future__ import annotations

from .http import main

main()
