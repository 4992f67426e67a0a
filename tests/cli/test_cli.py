"""`mcp-jobs` against a real SQLite file (and memory:// for the quick ones): every command, the
error output, and `--json` envelopes that validate against the MCP tools' own output schemas."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator

import examples.shop
from engine import connect
from mcp_jobs.cli import build_parser, main
from mcp_jobs.cli.exit_status import FAILED_EXIT
from mcp_jobs.cli.render import ProgressBar, print_text
from mcp_jobs.config import Settings
from mcp_jobs.fix_context import FixContext
from mcp_jobs.operations.jobs import LISTED_NEXT
from mcp_jobs.server import build_server
from tests.cli.databases import migrated
from tests.support.fix_lines import command_words

APP = "examples.shop"


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A working directory with its own jobs database and shop database; yields the jobs URL."""
    monkeypatch.chdir(tmp_path)
    for name in ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "MCP_JOBS_ENV", "MCP_JOBS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    yield f"sqlite:///{tmp_path}/jobs.db"


def words_of(fix: str) -> list[str]:
    """The arguments of a fix line after `mcp-jobs` (it may start with VAR=value assignments,
    and ends with the context flags it needs to run as given)."""
    return command_words(fix)[1:]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = cli(capsys, *argv, "--json")
    envelope: dict[str, Any] = json.loads(out)
    assert (code == 0) == envelope["ok"], envelope
    return code, envelope


def tool_schemas() -> dict[str, dict[str, Any]]:
    async def load() -> dict[str, dict[str, Any]]:
        jobs = await connect("memory://")
        try:
            server = build_server(Settings(), jobs)
            return {t.name: t.output_schema or {} for t in await server.list_tools()}
        finally:
            await jobs.close()

    return anyio.run(load)


def assert_tool_shape(tool: str, envelope: dict[str, Any]) -> None:
    """The CLI's `--json` is exactly a tool envelope: it validates against that tool's schema."""
    errors = list(Draft202012Validator(tool_schemas()[tool]).iter_errors(envelope))
    assert not errors, errors[0].message


def enqueue(url: str, *items: tuple[str, dict[str, Any], str | None]) -> list[str]:
    async def run() -> list[str]:
        jobs = await connect(url)
        try:
            ids = []
            for name, data, tenant in items:
                ids.append((await jobs.enqueue(name, data, tenant_id=tenant)).id)
            return ids
        finally:
            await jobs.close()

    assert examples.shop.fulfil_order is not None  # the shop's jobs are registered
    return anyio.run(run)


def test_db_migrate_creates_the_schema(shop: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, envelope = cli_json(capsys, "db", "migrate", "--database-url", shop)
    assert code == 0 and envelope["driver"] == "sqlite" and envelope["database"] == shop
    assert Path("jobs.db").exists()
    code, out, _ = cli(capsys, "db", "migrate", "--database-url", shop)
    assert code == 0 and "sqlite" in out
    code, envelope = cli_json(capsys, "db", "migrate", "--database-url", "memory://")
    assert envelope["driver"] == "memory"


def _steady(lines: list[str]) -> list[str]:
    return [line.split(":")[0] if line.startswith("disk: ") else line for line in lines]


def test_db_report_answers_whether_the_database_is_there_and_exits_1_when_not(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, envelope = cli_json(capsys, "db", "report", "--database-url", shop)
    assert code == 0 and envelope["reachable"] is False
    assert envelope["driver"] == "sqlite" and envelope["lines"][0].startswith("file: none at ")
    cli(capsys, "db", "migrate", "--database-url", shop)
    code, envelope = cli_json(capsys, "db", "report", "--database-url", shop)
    assert code == 0 and envelope["reachable"] is True
    code, out, _ = cli(capsys, "db", "report", "--database-url", shop)
    # The same lines, but for the free space, which other processes move between the two runs.
    assert code == 0 and _steady(out.splitlines()) == _steady(envelope["lines"])
    code, envelope = cli_json(capsys, "db", "report", "--database-url", "memory://")
    assert code == 0 and envelope["driver"] == "memory" and envelope["reachable"] is True


def test_the_default_database_is_the_embedded_sqlite_file(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, envelope = cli_json(capsys, "db", "migrate")
    assert code == 0 and envelope["database"] == "sqlite:///.mcp-jobs/jobs.db"
    assert Path(".mcp-jobs/jobs.db").exists()


def test_describe_lists_the_apps_jobs_and_names_an_unknown_one(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated(shop)
    code, envelope = cli_json(capsys, "jobs", "describe", "--app", APP, "--database-url", shop)
    assert_tool_shape("describe_jobs", envelope)
    names = {d["name"] for d in envelope["jobs"]}
    assert {"fulfil_order", "import_supplier_prices", "send_receipt"} <= names
    (nightly,) = envelope["tasks"]
    assert nightly["name"] == "nightly-price-import" and nightly["timezone"] == "Europe/London"
    assert len(nightly["next_occurrences"]) == LISTED_NEXT  # a listing's tasks are kept short
    assert {d["name"]: d["priority"] for d in envelope["jobs"]}["send_receipt"] == 5
    code, out, _ = cli(capsys, "jobs", "describe", "--app", APP, "--database-url", shop)
    assert code == 0 and "fulfil_order" in out and "orders" in out and "PRIORITY" in out
    (receipt_row,) = [line for line in out.splitlines() if line.startswith("send_receipt ")]
    assert receipt_row.split()[1:3] == ["emails", "5"]
    assert "nightly-price-import" in out and "30 2 * * *" in out

    code, envelope = cli_json(capsys, "jobs", "describe", "nope", "--database-url", shop)
    assert code == 1 and envelope["error"]["code"] == "JOB_UNKNOWN"
    assert_tool_shape("describe_jobs", envelope)
    code, out, err = cli(capsys, "jobs", "describe", "nope", "--database-url", shop)
    assert code == 1 and out == ""
    assert "error JOB_UNKNOWN" in err and "cause:" in err
    assert "mcp-jobs jobs describe --json --database-url" in err


def test_operating_jobs_from_the_cli(shop: str, capsys: pytest.CaptureFixture[str]) -> None:
    order, prices, receipt = enqueue(
        shop,
        ("fulfil_order", {"order_id": 1, "sku": "mug", "quantity": 1}, None),
        ("import_supplier_prices", {"supplier": "leafco", "batch": "b1"}, None),
        ("send_receipt", {"order_id": 1, "email": "a@b.example"}, "acme"),
    )
    db = ("--database-url", shop)
    code, listed = cli_json(capsys, "jobs", "ls", *db)
    assert_tool_shape("list_jobs", listed)
    assert {j["id"] for j in listed["jobs"]} == {order, prices, receipt}
    code, listed = cli_json(capsys, "jobs", "ls", "--tenant-id", "acme", *db)
    assert [j["id"] for j in listed["jobs"]] == [receipt]
    code, out, _ = cli(capsys, "jobs", "ls", "--state", "ready", *db)
    assert code == 0 and order in out and "fulfil_order" in out

    code, drained = cli_json(capsys, "jobs", "drain", "--app", APP, *db)
    assert code == 0 and drained["claimed"] == 3
    assert drained["outcomes"] == {"parked": 1, "retried": 1, "succeeded": 1}

    code, shown = cli_json(capsys, "jobs", "show", order, *db)
    assert_tool_shape("inspect_job", shown)
    assert [s["name"] for s in shown["steps"]] == ["reserve-stock", "charge-card", "settle-payment"]
    code, out, _ = cli(capsys, "jobs", "show", order, *db)
    assert "step charge-card: completed" in out and "suspended" in out and "priority 0" in out

    # The order is parked on its sleep: cancel it, then see the fix lines that follow.
    code, out, _ = cli(capsys, "jobs", "cancel", order, *db)
    assert code == 0 and "is now cancelled" in out
    code, refused = cli_json(capsys, "jobs", "retry", order, *db)
    assert code == 1 and refused["error"]["code"] == "JOB_NOT_RETRYABLE"
    assert_tool_shape("retry_job", refused)
    fix = refused["error"]["fix"]
    assert words_of(fix)[:4] == ["jobs", "retry", order, "--include-cancelled"]
    code, back = cli_json(capsys, *words_of(fix), *db)
    assert code == 0 and back["job"]["state"] == "ready"
    code, again = cli_json(capsys, "jobs", "cancel", receipt, *db)
    assert code == 1 and again["error"]["code"] == "JOB_NOT_CANCELLABLE"
    code, out, _ = cli(capsys, *words_of(again["error"]["fix"]), *db)
    assert code == 0 and json.loads(out)["job"]["state"] == "done"

    # An id typed with what no id has (a space, "job ", capitals): the command with the id.
    for typed in [f" {receipt}", f"job {receipt}", receipt.upper()]:
        code, spaced = cli_json(capsys, "jobs", "show", typed, *db)
        assert code == 1 and spaced["error"]["code"] == "JOB_NOT_FOUND"
        assert words_of(spaced["error"]["fix"])[:3] == ["jobs", "show", receipt], spaced
        assert "next_call" not in spaced["error"], spaced
        code, out, _ = cli(capsys, *words_of(spaced["error"]["fix"]), *db)
        assert code == 0 and receipt in out

    # A name in another spelling, or slipped: the command with the name meant.
    for flag, typed, meant in [
        ("--name", "Send_Receipt", "send_receipt"),
        ("--queue", "ordres", "orders"),
    ]:
        code, unknown = cli_json(capsys, "jobs", "ls", flag, typed, *db)
        assert code == 1 and unknown["error"]["code"] in ("JOB_UNKNOWN", "QUEUE_UNKNOWN")
        assert words_of(unknown["error"]["fix"])[:4] == ["jobs", "ls", flag, meant], unknown
        code, out, _ = cli(capsys, *words_of(unknown["error"]["fix"]), *db)
        assert code == 0

    # Pinned to another tenant, acme's receipt does not exist.
    code, hidden = cli_json(capsys, "jobs", "show", receipt, "--tenant", "globex", *db)
    assert code == 1 and hidden["error"]["code"] == "JOB_NOT_FOUND"
    # Its fix stays inside the pin: it lists globex's jobs, where the receipt is not.
    assert "--tenant globex" in hidden["error"]["fix"]
    code, out, _ = cli(capsys, *words_of(hidden["error"]["fix"]), *db)
    assert code == 0 and receipt not in out

    code, stats = cli_json(capsys, "jobs", "stats", *db)
    assert_tool_shape("queue_stats", stats)
    code, diagnosis = cli_json(capsys, "jobs", "diagnose", "--app", APP, *db)
    assert_tool_shape("diagnose_queue", diagnosis)
    assert "NO_LIVE_WORKERS" in {f["code"] for f in diagnosis["findings"]}
    # A queue slipped: the finding's fix is this diagnosis of the queue meant, not the stats.
    code, slipped = cli_json(capsys, "jobs", "diagnose", "--queue", "ordres", "--app", APP, *db)
    (unknown,) = [f for f in slipped["findings"] if f["code"] == "QUEUE_UNKNOWN"]
    assert words_of(unknown["fix"])[:4] == ["jobs", "diagnose", "--queue", "orders"], unknown
    code, diagnosed = cli_json(capsys, *words_of(unknown["fix"]), *db)
    assert code == 0 and "QUEUE_UNKNOWN" not in {f["code"] for f in diagnosed["findings"]}


def test_backfills_from_the_cli(shop: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert examples.shop.seed_customers(20) == 15
    db = ("--database-url", migrated(shop), "--app", APP)
    code, pending = cli_json(capsys, "backfill", "--pending", *db)
    assert_tool_shape("list_backfills", pending)
    assert [b["name"] for b in pending["backfills"]] == ["normalize_emails"]
    code, plan = cli_json(capsys, "backfill", "normalize_emails", *db)
    assert_tool_shape("run_backfill", plan)
    assert plan["plan"]["rows_remaining"] == 15 and plan["plan"]["would_run"] is True
    code, out, _ = cli(capsys, "backfill", "normalize_emails", *db)
    assert "15 row(s)" in out and "mcp-jobs backfill normalize_emails --write" in out

    code, started = cli_json(capsys, "backfill", "normalize_emails", "--write", *db)
    assert code == 0 and started["start"]["name"] == "normalize_emails"
    assert "settled" not in started  # not at a terminal: it does not wait for a worker
    code, drained = cli_json(capsys, "jobs", "drain", *db)
    assert drained["outcomes"] == {"succeeded": 1}

    code, applied = cli_json(capsys, "backfill", "normalize_emails", "--write", *db)
    assert code == 1 and applied["error"]["code"] == "BACKFILL_APPLIED"
    fix = applied["error"]["fix"]
    assert words_of(fix)[:4] == ["backfill", "normalize_emails", "--force", "--json"]
    code, out, _ = cli(capsys, *words_of(fix), *db)  # the forced write's plan: it writes nothing
    forced_plan = json.loads(out)["plan"]
    assert code == 0 and forced_plan["force"] is True and forced_plan["would_run"] is True
    code, out, _ = cli(capsys, *words_of(fix), "--write", "--wait", "0", *db)
    assert code == 0 and json.loads(out)["start"]["name"] == "normalize_emails"
    code, out, _ = cli(capsys, "backfill", *db)
    assert "normalize_emails" in out and "environment development" in out


def test_configuration_errors_print_code_cause_and_fix(
    shop: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, bad_url = cli_json(capsys, "jobs", "ls", "--database-url", "mysql://x/y")
    assert code == 1 and bad_url["error"]["code"] == "DATABASE_URL_INVALID"
    missing = ("--app", "no.such.module", "--database-url", shop)
    code, bad_app = cli_json(capsys, "jobs", "ls", *missing)
    assert code == 1 and bad_app["error"]["code"] == "APP_IMPORT_FAILED"
    monkeypatch.setenv("MCP_JOBS_APP", "no.such.module")
    code, from_env = cli_json(capsys, "jobs", "ls", "--database-url", shop)
    assert from_env["error"]["code"] == "APP_IMPORT_FAILED"
    # Named by the variable, not --app: the cause says neither.
    assert '"no.such.module"' in from_env["error"]["cause"]
    assert "--app" not in from_env["error"]["cause"]
    monkeypatch.delenv("MCP_JOBS_APP")
    monkeypatch.setenv("MCP_JOBS_DATABASE_URL", "memory://")
    code, envelope = cli_json(capsys, "db", "migrate")
    assert code == 0 and envelope["driver"] == "memory"


def test_http_serving_binds_loopback_and_refuses_to_start_without_a_token(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["serve", "--transport", "http"])
    assert args.host == "127.0.0.1"
    code, _, err = cli(capsys, "serve", "--transport", "http", "--database-url", "memory://")
    assert code == 1 and "error HTTP_TOKEN_REQUIRED" in err and "fix:" in err


def test_the_progress_bar_draws_only_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    async def draw(enabled: bool) -> None:
        bar = ProgressBar("drain", enabled=enabled)
        await bar.update(5, 10, "half")
        await bar.update(10, 10, "done")
        bar.close()

    anyio.run(draw, False)
    assert capsys.readouterr().err == ""
    anyio.run(draw, True)
    err = capsys.readouterr().err
    assert "drain [" in err and "10/10" in err and err.endswith("\n")


def test_the_worker_command_refuses_a_negative_prefetch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["worker", "--database-url", f"sqlite:///{tmp_path}/jobs.db", "--prefetch", "-1"])
    assert code == 1
    err = capsys.readouterr().err
    assert "INVALID_ARGUMENT" in err and "prefetch" in err


def test_the_stats_table_shows_a_busy_queues_shorter_done_window() -> None:
    counts = dict(
        ready=0, delayed=0, running=0, suspended=0, dead=0, failed=0, cancelled=0, oldest_ready_ms=0
    )
    queues = [
        {"queue": "calm", "done": 12, "settled_window_ms": 3_600_000, **counts},
        {"queue": "busy", "done": 10_000, "settled_window_ms": 46_500, **counts},
    ]
    out = io.StringIO()
    print_text("queue_stats", {"ok": True, "queues": queues}, out)
    header, calm, busy = out.getvalue().splitlines()[:3]
    assert "DONE 1H" in header
    assert calm.split()[7] == "12"
    assert "10000 in 46 s" in busy


def test_a_queue_name_with_blanks_around_it_is_quoted_in_the_stats_table() -> None:
    """'sync ' beside 'sync': padded into its column, the blank vanished and read as a second
    row of the same queue."""
    counts = dict(
        ready=1, delayed=0, running=0, suspended=0, dead=0, failed=0, cancelled=0, done=0,
        oldest_ready_ms=0,
    )  # fmt: skip
    queues = [{"queue": "sync", **counts}, {"queue": "sync ", **counts}]
    out = io.StringIO()
    print_text("queue_stats", {"ok": True, "queues": queues}, out)
    _, plain, blank = out.getvalue().splitlines()[:3]
    assert plain.split()[0] == "sync" and blank.split()[0] == "'sync" and "sync '" in blank


def test_a_worker_whose_metrics_port_is_taken_fails_with_that_code(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port is bound inside the worker's task group: its typed failure comes out as itself,
    not as INTERNAL around an exception group."""
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = str(holder.getsockname()[1])
        code, out, err = cli(
            capsys, "worker", "--database-url", shop, "--queues", "*", "--metrics-port", taken
        )
    assert code == FAILED_EXIT  # not retryable: the fix is another port
    assert "METRICS_PORT_UNAVAILABLE" in out + err and "INTERNAL" not in out + err
    # The command again with a port free now (ss, which the fix named, is not in slim images).
    words = command_words((out + err).split("fix:", 1)[1].strip())
    free = words[words.index("--metrics-port") + 1]
    assert words[:2] == ["mcp-jobs", "worker"] and free not in ("0", taken)


@pytest.mark.parametrize(
    ("flag", "typed", "mended"),
    [("--metrics-port", "99999", "65535"), ("--log-level", "bogus", "INFO")],
)
def test_a_worker_flag_out_of_range_is_mended(
    shop: str, capsys: pytest.CaptureFixture[str], flag: str, typed: str, mended: str
) -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    code, _, err = cli(capsys, "worker", "--database-url", shop, "--queues", "*", flag, typed)
    assert code == 1 and "INVALID_ARGUMENT" in err
    words = command_words(err.split("fix:", 1)[1].strip())
    assert words[words.index(flag) + 1] == mended


PORT_FLAGS = [
    ("serve", "--transport", "http", "--port"),
    ("dashboard", "--port"),
    ("worker", "--queues", "*", "--metrics-port"),
]


async def _never_served(*_: object, **__: object) -> None:
    raise AssertionError("a port out of range was bound")


@pytest.mark.parametrize("command", PORT_FLAGS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("typed", "nearest"), [("99999", "65535"), ("65536", "65535"), ("-1", "0")]
)
def test_a_port_out_of_range_is_refused_with_the_command_at_the_nearest_port(
    shop: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
    typed: str,
    nearest: str,
) -> None:
    """One bound for every port flag. Before: `serve --transport http` crashed INTERNAL with a
    traceback, `dashboard` bound 99999 - 65536 (65536: any port) and refused -1 with a fix
    that failed the same way."""
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    monkeypatch.setenv("MCP_JOBS_TOKEN", "a" * 64)
    monkeypatch.setenv("MCP_JOBS_INCIDENT_DIR", str(tmp_path / "incidents"))
    monkeypatch.setattr("mcp_jobs.dashboard.serve.serve_dashboard", _never_served)
    code, out, err = cli(capsys, *command, typed, "--database-url", shop)
    assert code == 1 and "error INVALID_ARGUMENT" in err, err
    assert "Traceback" not in out + err and "dashboard at" not in err
    words = command_words(err.split("fix:", 1)[1].strip())
    assert words[:2] == ["mcp-jobs", command[0]]
    assert words[words.index(command[-1]) + 1] == nearest, err


def test_a_bad_prune_interval_is_mended_to_its_own_default(
    shop: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix said `export MCP_JOBS_PRUNE_EVERY=7d` (the retention's default): a prune a week
    apart, where the default is every 5 minutes."""
    for bad in ("0", "abc"):
        monkeypatch.setenv("MCP_JOBS_PRUNE_EVERY", bad)
        code, _, err = cli(capsys, "worker", "--queues", "*", "--database-url", shop)
        assert code == 1 and "RETENTION_SETTING_INVALID" in err
        assert err.split("fix:", 1)[1].strip() == "export MCP_JOBS_PRUNE_EVERY=5m"


def test_a_fix_that_is_a_tool_call_reaches_the_cli_as_its_command(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cursor that does not decode, a page or a wait over the cap: the engine's fix is a tool
    call (`list_jobs {…}`), which a shell cannot run; the CLI prints the command that makes it,
    and that command runs as given."""
    db = ("--database-url", migrated(shop), "--app", APP)
    for asked, code, command in (
        (["jobs", "ls", "--cursor", "zz", "--state", "dead"], "CURSOR_INVALID", ["jobs", "ls"]),
        (["jobs", "describe", "--cursor", "greet"], "CURSOR_INVALID", ["jobs", "describe"]),
        (["jobs", "ls", "--limit", "5000"], "LIMIT_EXCEEDED", ["jobs", "ls"]),
        (
            ["backfill", "normalize_emails", "--runs", "--runs-cursor", "zz"],
            "CURSOR_INVALID",
            ["backfill", "normalize_emails", "--runs"],
        ),
    ):
        status, refused = cli_json(capsys, *asked, *db)
        assert status == 1 and refused["error"]["code"] == code, refused
        fix = refused["error"]["fix"]
        assert words_of(fix)[: len(command)] == command, fix
        status, out, err = cli(capsys, *words_of(fix))
        assert status == 0 and json.loads(out)["ok"] is True, (fix, out, err)
    status, refused = cli_json(capsys, "jobs", "ls", "--cursor", "zz", "--state", "dead", *db)
    assert words_of(refused["error"]["fix"])[:4] == ["jobs", "ls", "--state", "dead"]
    # Below the range, the range this server takes (not the engine's wider one).
    status, refused = cli_json(capsys, "jobs", "ls", "--limit", "0", *db)
    assert refused["error"]["code"] == "INVALID_ARGUMENT"
    assert "a whole number from 1 to 200" in refused["error"]["cause"]


def test_a_page_size_refused_beside_a_cursor_keeps_the_cursor_that_goes_with_the_filters(
    shop: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--cursor C --limit 500` was mended to the first page (the cursor dropped); `--cursor C
    --limit 0 --state dead`, C from an unfiltered list, to a line that kept C and then failed
    CURSOR_INVALID. A cursor that does not go with the filters is refused first; otherwise the
    fix keeps it. Each fix runs as given."""
    enqueue(
        shop,
        *[
            ("fulfil_order", {"order_id": n, "sku": "tea", "quantity": 1}, None)
            for n in range(1, 6)
        ],
    )
    db = ("--database-url", shop, "--app", APP)
    _, first = cli_json(capsys, "jobs", "ls", "--limit", "2", *db)
    cursor = first["next_cursor"]
    _, rest = cli_json(capsys, "jobs", "ls", "--cursor", cursor, "--limit", "3", *db)
    after = [j["id"] for j in rest["jobs"]]
    for limit, code, page in (
        ("500", "LIMIT_EXCEEDED", after),
        ("0", "INVALID_ARGUMENT", after[:1]),
    ):
        status, refused = cli_json(capsys, "jobs", "ls", "--cursor", cursor, "--limit", limit, *db)
        assert status == 1 and refused["error"]["code"] == code, refused
        fix = words_of(refused["error"]["fix"])
        assert fix[:2] == ["jobs", "ls"] and fix[fix.index("--cursor") + 1] == cursor, fix
        status, mended = cli_json(capsys, *fix)
        assert status == 0 and [j["id"] for j in mended["jobs"]] == page, (fix, mended)
    for limit in ("0", "500"):
        asked = ("jobs", "ls", "--cursor", cursor, "--limit", limit, "--state", "dead")
        status, refused = cli_json(capsys, *asked, *db)
        assert refused["error"]["code"] == "CURSOR_INVALID", refused
        fix = words_of(refused["error"]["fix"])
        assert "--cursor" not in fix and fix[:4] == ["jobs", "ls", "--state", "dead"], fix
        status, mended = cli_json(capsys, *fix)
        assert status == 0 and mended["jobs"] == [], (fix, mended)


@pytest.mark.parametrize(
    "fix",
    [
        'list_jobs {"nosuch": "zz"}',  # an argument the command has no flag for
        'wait_for_job {"job_id": "x"}',  # a tool the CLI does not map
        'inspect_job {"job_id": "x", "steps_limit": 5}',  # an argument `jobs show` cannot give
        "list_jobs not json",
        "mcp-jobs jobs ls",
    ],
)
def test_a_tool_call_the_cli_cannot_make_is_left_as_it_is(fix: str) -> None:
    fixes = FixContext.of(Settings(database_url="sqlite:////tmp/x.db"), face="cli")
    assert fixes.cli_command(fix) is None
    mcp = FixContext.of(Settings(database_url="sqlite:////tmp/x.db"), face="mcp")
    if not fix.startswith("mcp-jobs"):
        assert mcp.qualify(fix) == fix  # an MCP client makes tool calls as they are


def test_an_empty_database_url_is_refused_not_read_as_the_default(
    shop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fix line names a URL holding a secret as "$MCP_JOBS_DATABASE_URL"; run where that is
    not set, the flag is empty, and the command must not act on the default SQLite file."""
    status, refused = cli_json(capsys, "db", "report", "--database-url", "")
    assert status == 1 and refused["error"]["code"] == "DATABASE_URL_INVALID"
    assert "$MCP_JOBS_DATABASE_URL" in refused["error"]["cause"]
    status, _, err = cli(capsys, "jobs", "stats", "--database-url", "")
    assert status == 1 and "DATABASE_URL_INVALID" in err
    assert not (tmp_path / ".mcp-jobs").exists()


def test_an_empty_tenant_is_refused_not_read_as_no_pin(
    shop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--tenant "$TENANT"` with the variable unset: read as no tenant, the pin was dropped and
    the command listed (a server would have served) every tenant's jobs."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    status, refused = cli_json(capsys, "jobs", "ls", "--tenant", "", "--database-url", url)
    assert status == 1 and refused["error"]["code"] == "INVALID_ARGUMENT"
    assert refused["error"]["details"]["argument"] == "--tenant"
    assert refused["error"]["fix"] == "mcp-jobs jobs ls --help"
    status, _, err = cli(capsys, "serve", "--tenant", "", "--database-url", url)
    assert status == 1 and "INVALID_ARGUMENT" in err
    assert not (tmp_path / "jobs.db").exists()  # refused before the database is opened
    migrated(url)
    status, refused = cli_json(capsys, "jobs", "ls", "--tenant-id", "", "--database-url", url)
    assert status == 1 and refused["error"]["details"]["argument"] == "tenant_id"


def test_an_empty_app_is_refused_not_read_as_no_app(
    shop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--app "$APP"` with the variable unset: read as no app, `jobs ls` answered and a worker
    started serving none of the app's jobs."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    for app in ("", " ", ","):
        status, refused = cli_json(capsys, "jobs", "ls", "--app", app, "--database-url", url)
        assert status == 1 and refused["error"]["code"] == "INVALID_ARGUMENT"
        assert refused["error"]["retryable"] is False
        assert refused["error"]["details"]["argument"] == "--app"
        assert refused["error"]["fix"] == "mcp-jobs jobs ls --help"
    status, _, err = cli(capsys, "worker", "--app", APP, "--app", "", "--database-url", url)
    assert status == 1 and "INVALID_ARGUMENT" in err
    assert command_words(err.split("fix:", 1)[1].strip()) == ["mcp-jobs", "worker", "--help"]
    monkeypatch.setenv("MCP_JOBS_APP", "")
    status, refused = cli_json(capsys, "jobs", "ls", "--database-url", url)
    assert status == 1 and refused["error"]["details"]["argument"] == "MCP_JOBS_APP"
    assert not (tmp_path / "jobs.db").exists()  # refused before the database is opened
    migrated(url)
    status, listed = cli_json(capsys, "jobs", "ls", "--app", APP, "--database-url", url)
    assert status == 0, listed  # the flag wins over the empty variable


def test_the_demo_on_a_database_it_cannot_use_prints_code_cause_and_fix(tmp_path: Path) -> None:
    """It printed a traceback (the README's first command, run where the variable is set). A
    process of its own: the demo quiets the worker's loggers in the process it runs in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    env["MCP_JOBS_DATABASE_URL"] = "mysql://x/y"
    argv = [sys.executable, "-m", "mcp_jobs.cli", "demo"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    err = done.stderr
    assert done.returncode == 1
    assert "error DATABASE_URL_INVALID" in err and "Traceback" not in err
    # Absolute: the line works from any directory.
    assert f"fix:   export MCP_JOBS_DATABASE_URL=sqlite:///{tmp_path}/.mcp-jobs/jobs.db" in err


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback(tmp_path: Path) -> None:
    """`mcp-jobs jobs ls --json | head -1`: the pipe closed before the command wrote. It
    printed two tracebacks on stderr (its write, then the interpreter's flush at exit); now
    nothing, and the exit status a shell's own tools give (141, SIGPIPE's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    read, write = os.pipe()
    os.close(read)  # closed before the command starts: its first write finds no reader
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    argv = [sys.executable, "-m", "mcp_jobs.cli", "jobs", "ls", "--json", "--database-url", url]
    try:
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, stdout=write, stderr=subprocess.PIPE, timeout=60
        )
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == b"", done.stderr.decode()


@pytest.mark.parametrize(
    "words",
    [["worker", "--metrics-port", "70000"], ["jobs", "ls", "--state", "Dead"], ["job", "ls"]],
)
def test_a_command_refused_before_it_loads_the_app_still_writes_its_environment(
    tmp_path: Path, words: list[str]
) -> None:
    """A flag out of range or a mended word is refused before `--app` is imported, which is
    where the app declares what it reads (`SHOP_DB`): the fix names it all the same, so a
    worker started from it elsewhere serves the same shop. A process of its own: here the
    example is imported already."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    env["SHOP_DB"] = str(tmp_path / "shop.db")
    url = f"sqlite:///{tmp_path}/jobs.db"
    argv = [sys.executable, "-m", "mcp_jobs.cli", *words, "--app", APP, "--database-url", url]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    fix = next(line for line in done.stderr.splitlines() if line.startswith("  fix:"))
    assert fix.split()[1] == f"SHOP_DB={tmp_path / 'shop.db'}", fix
