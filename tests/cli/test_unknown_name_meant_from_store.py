"""A job name that slipped, typed where no --app registers any job: JOB_UNKNOWN names the job the
store holds that it plainly stands for, and its fix runs with that name. It said "registered:
none" and sent the user to `jobs describe`, which without the app shows no job either."""

from __future__ import annotations

import pytest

from tests.cli.support import run, stored_job
from tests.support.fix_lines import command_words


def test_a_slipped_name_is_meant_as_a_stored_one(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stored_job(url, "ship_parcel", "orders")
    code, refused = run(
        capsys, "jobs", "ls", "--name", "ship_parcle", "--json", "--database-url", url
    )
    error = refused["error"]
    assert code == 1 and error["code"] == "JOB_UNKNOWN", error
    assert "in the store: ship_parcel" in error["cause"], error
    assert error["details"]["meant"] == "ship_parcel", error
    code, listed = run(capsys, *command_words(error["fix"])[1:], "--json")
    assert code == 0 and [j["name"] for j in listed["jobs"]] == ["ship_parcel"], listed


def test_a_pause_of_a_slipped_name_lists_the_stored_ones(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stored_job(url, "ship_parcel", "orders")
    code, paused = run(
        capsys, "queues", "pause", "--job", "ship_parcl", "--json", "--database-url", url
    )
    (notice,) = paused["notices"]
    assert code == 0 and notice["code"] == "JOB_UNKNOWN", paused
    assert "(meant ship_parcel?)" in notice["cause"], notice
    assert "in the store: ship_parcel" in notice["cause"], notice
