"""A worker carries only what it uses: metrics and cron load when first asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

import engine


def loaded_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after running `code`."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return set(out.split())


def test_importing_the_engine_loads_neither_prometheus_nor_croniter() -> None:
    loaded = loaded_after("import engine")
    assert "engine" in loaded
    assert "prometheus_client" not in loaded
    assert "croniter" not in loaded


def test_metrics_and_cron_load_when_first_used() -> None:
    loaded = loaded_after(
        "from zoneinfo import ZoneInfo\n"
        "from engine import WorkerMetrics\n"
        "from engine.tasks.occurrences import Schedule\n"
        "Schedule('*/5 * * * *', ZoneInfo('UTC'), hash_id='tick')\n"
    )
    assert {"prometheus_client", "croniter"} <= loaded


def test_the_lazy_names_are_the_real_ones_and_others_still_fail() -> None:
    from engine.metrics import WorkerMetrics, serve_metrics

    assert engine.WorkerMetrics is WorkerMetrics
    assert engine.serve_metrics is serve_metrics
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = engine.no_such_name
