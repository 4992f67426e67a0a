"""Which loop `mcp-jobs worker` takes: uvloop when installed (auto), or what MCP_JOBS_EVENT_LOOP
says; a choice that cannot be honoured is a typed error, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import InvalidArgumentError
from engine.extras import install_line
from mcp_jobs.cli import event_loop, main
from mcp_jobs.cli.event_loop import EVENT_LOOP_ENV, backend_options


@pytest.mark.parametrize(
    ("choice", "installed", "use_uvloop"),
    [
        ("", True, True),
        ("auto", True, True),
        (" AUTO ", False, False),
        ("asyncio", True, False),
        ("uvloop", True, True),
    ],
)
def test_the_choice_and_what_is_installed_decide(
    choice: str, installed: bool, use_uvloop: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_loop, "uvloop_installed", lambda: installed)
    monkeypatch.setenv(EVENT_LOOP_ENV, choice)
    assert backend_options() == {"use_uvloop": use_uvloop}


def test_without_the_variable_auto_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    monkeypatch.setattr(event_loop, "uvloop_installed", lambda: False)
    assert backend_options() == {"use_uvloop": False}


def test_uvloop_asked_for_but_missing_is_refused_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(event_loop, "uvloop_installed", lambda: False)
    with pytest.raises(InvalidArgumentError) as caught:
        backend_options("uvloop")
    assert caught.value.code == "INVALID_ARGUMENT"
    assert install_line("uvloop") in caught.value.fix


def test_an_unknown_loop_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="trio"):
        backend_options("trio")


def test_the_worker_command_reports_a_bad_choice_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "trio")
    code = main(["worker", "--database-url", f"sqlite:///{tmp_path}/jobs.db"])
    assert code == 1
    err = capsys.readouterr().err
    assert "INVALID_ARGUMENT" in err and EVENT_LOOP_ENV in err
    assert f"fix:   export {EVENT_LOOP_ENV}=auto" in err


@pytest.mark.parametrize(("typed", "meant"), [("uv-loop", "uvloop"), ("asyncoi", "asyncio")])
def test_a_slip_in_the_loop_setting_is_mended_to_the_loop_it_names(typed: str, meant: str) -> None:
    """`MCP_JOBS_EVENT_LOOP=uv-loop` was mended to `auto`, which need not be uvloop."""
    with pytest.raises(InvalidArgumentError) as refused:
        backend_options(typed)
    assert refused.value.fix == f"export MCP_JOBS_EVENT_LOOP={meant}"
