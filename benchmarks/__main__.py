"""`python -m benchmarks --dsn postgresql://…` — see `benchmarks/runner.py`."""

from __future__ import annotations

from benchmarks.runner import main

raise SystemExit(main())
