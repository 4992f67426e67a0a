"""`mcp-jobs worker --metrics-host`: where the metrics endpoint listens (loopback unless told),
and a host that cannot be bound refused with the command that can."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_jobs.cli import main
from mcp_jobs.cli.exit_status import FAILED_EXIT
from tests.support.fix_lines import command_words


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.chdir(tmp_path)
    for name in ("MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "MCP_JOBS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    yield f"sqlite:///{tmp_path}/jobs.db"


def worker(capsys: pytest.CaptureFixture[str], url: str, *flags: str) -> tuple[int, str]:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    code = main(["worker", "--database-url", url, "--queues", "*", *flags])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out + err


def fixed(output: str) -> list[str]:
    return command_words(output.split("fix:", 1)[1].strip())


def test_the_metrics_host_flag_is_the_address_bound(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Held on 127.0.0.2 (loopback on Linux), the port is taken there and only there: the
    refusal names that address, and its fix keeps the host with a port free now."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.2", 0))
        holder.listen()
        taken = str(holder.getsockname()[1])
        code, output = worker(capsys, url, "--metrics-host", "127.0.0.2", "--metrics-port", taken)
    # Not retryable, as the dashboard's HTTP_BIND_FAILED: the fix is another port.
    assert code == FAILED_EXIT and "METRICS_PORT_UNAVAILABLE" in output, output
    assert f"127.0.0.2:{taken}" in output
    words = fixed(output)
    assert words[words.index("--metrics-host") + 1] == "127.0.0.2"
    assert words[words.index("--metrics-port") + 1] not in (taken, "0")


@pytest.mark.parametrize(
    ("host", "code", "status"),
    [
        ("not a host", "HTTP_SETTING_INVALID", FAILED_EXIT),
        # Not this machine's: refused again as given, whatever the wait.
        ("192.0.2.1", "METRICS_PORT_UNAVAILABLE", FAILED_EXIT),
    ],
)
def test_a_metrics_host_that_cannot_be_bound_is_mended_to_loopback(
    url: str, capsys: pytest.CaptureFixture[str], host: str, code: str, status: int
) -> None:
    """Not an address at all, or not one of this machine's (TEST-NET-1): the fix is the
    command on loopback, the default."""
    exit_code, output = worker(capsys, url, "--metrics-host", host, "--metrics-port", "0")
    assert exit_code == status and f"error {code}" in output, output
    words = fixed(output)
    assert words[:2] == ["mcp-jobs", "worker"]
    assert words[words.index("--metrics-host") + 1] == "127.0.0.1"
    assert words[words.index("--metrics-port") + 1] == "0"


def test_a_metrics_host_without_a_metrics_port_is_refused_not_ignored(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Taken, it bound nothing and the operator believed metrics were served."""
    code, output = worker(capsys, url, "--metrics-host", "0.0.0.0")
    assert code == 1 and "error INVALID_ARGUMENT" in output, output
    assert "--metrics-host" not in fixed(output)
