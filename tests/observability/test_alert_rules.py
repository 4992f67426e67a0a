"""The README's suggested alert rules, taken from the README's text so they cannot drift: every
metric they name exists, and (with promtool) each alert fires when it should, including when the
last worker dies and every series it published goes stale."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
PROMTOOL_ENV = "PROMTOOL"


def readme_rules() -> str:
    """The README's one ```yaml block of alert rules."""
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (rules,) = [block for block in blocks if "alert: JobsNoWorkers" in block]
    return str(rules)


def promtool() -> str:
    found = os.environ.get(PROMTOOL_ENV) or shutil.which("promtool")
    if not found:
        pytest.skip(
            f"promtool not found (on PATH or ${PROMTOOL_ENV}): Debian's `prometheus` package "
            "has it; the README's alert rules are checked for metric names only"
        )
    return found


def test_every_metric_the_readme_rules_name_is_published() -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    from engine.metrics import WorkerMetrics

    families = list(WorkerMetrics().registry.collect())
    # A labelled gauge has no sample before its first reading: its family names it.
    published = {f.name for f in families} | {s.name for f in families for s in f.samples}
    named = set(re.findall(r"\bmcp_jobs_[a-z_]+", readme_rules()))
    assert named and named <= published, named - published


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    shown = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"mcp_jobs_{name}{{{shown}}}", "values": values}


def alert(at: str, name: str, *fired: dict[str, str]) -> dict[str, Any]:
    return {
        "eval_time": at,
        "alertname": name,
        "exp_alerts": [{"exp_labels": labels} for labels in fired],
    }


# Each case: what the workers published (one sample a minute), and the alerts expected then.
CASES: dict[str, dict[str, Any]] = {
    "the last worker dies with work waiting: its series go stale": {
        "input_series": [
            series("workers_alive", "1 1 1 stale", instance="w1:9464"),
            series("queue_depth", "5 5 5 stale", instance="w1:9464", queue="orders"),
        ],
        "alert_rule_test": [
            alert("2m", "JobsNoWorkers"),
            alert("10m", "JobsNoWorkers", {}),
        ],
    },
    "a worker is alive": {
        "input_series": [
            series("workers_alive", "1x15", instance="w1:9464"),
            series("queue_depth", "5x15", instance="w1:9464", queue="orders"),
        ],
        "alert_rule_test": [alert("10m", "JobsNoWorkers")],
    },
    "gauges served beside an app (keep_fresh) read no live worker while work waits": {
        "input_series": [
            series("workers_alive", "0x15", instance="api:9464"),
            series("queue_depth", "5x15", instance="api:9464", queue="orders"),
        ],
        "alert_rule_test": [alert("10m", "JobsNoWorkers", {})],
    },
    "no live worker and nothing waiting": {
        "input_series": [
            series("workers_alive", "0x15", instance="api:9464"),
            series("queue_depth", "0x15", instance="api:9464", queue="orders"),
        ],
        "alert_rule_test": [alert("10m", "JobsNoWorkers")],
    },
    "two workers publish the same database-wide gauges: one alert a queue": {
        "input_series": [
            *(
                series("queue_oldest_ready_seconds", "400x15", instance=i, queue="orders")
                for i in ("w1:9464", "w2:9464")
            ),
            *(
                series("queue_dead_jobs", "2x15", instance=i, queue="mail")
                for i in ("w1:9464", "w2:9464")
            ),
        ],
        "alert_rule_test": [
            alert("1m", "JobsBacklogOld"),
            alert("10m", "JobsBacklogOld", {"queue": "orders"}),
            alert("1m", "JobsDeadLetters", {"queue": "mail"}),
        ],
    },
}


def test_the_readme_alert_rules_fire_when_they_should(tmp_path: Path) -> None:
    tool = promtool()
    (tmp_path / "rules.yml").write_text(readme_rules(), encoding="utf-8")
    tests = [{"name": name, "interval": "1m", **case} for name, case in CASES.items()]
    spec = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}
    (tmp_path / "rules_test.yml").write_text(json.dumps(spec), encoding="utf-8")  # JSON is YAML
    ran = subprocess.run(
        [tool, "test", "rules", "rules_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
