"""`mcp-jobs db prune` stopped by Ctrl-C mid-way: it exited 130 and printed nothing, though it
had deleted rows. As `jobs retry-all` does, it ends after the batch in hand, says how far it got
(the rows pruned per state so far) and prints the line that prunes the rest."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import anyio
import pytest

from engine import JobRegistry, ManualClock, connect
from engine.testing.kit.test_retention import settle
from mcp_jobs.cli import main
from tests.support.fix_lines import command_words

ROWS = 20

# The command in a child, one row a batch, held after its first batch until the parent has
# sent SIGINT and says to go on: the Ctrl-C lands mid-way, every time.
_CHILD = """
import sys
import anyio
import pytest
import mcp_jobs.operations.prune as prune
real = prune.prune_all
held = []
async def one_a_batch(jobs, cutoffs, **kwargs):
    got = await real(jobs, cutoffs, **{**kwargs, "batch_size": 1})
    if not held:
        held.append(True)
        print("holding", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
    return got
prune.prune_all = one_a_batch
from mcp_jobs.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _seed(url: str) -> None:
    async def run() -> None:
        clock = ManualClock(time.time_ns() // 1_000_000 - 3_600_000)
        jobs = await connect(url, clock=clock, registry=JobRegistry())
        try:
            for _ in range(ROWS):
                await settle(jobs.driver, "done", queue="mail")
        finally:
            await jobs.close()

    anyio.run(run)


def _interrupted(argv: list[str]) -> subprocess.CompletedProcess[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "holding\n"  # one batch pruned, the next not begun
        child.send_signal(signal.SIGINT)
        out, err = child.communicate("go\n", timeout=60)
    finally:
        child.kill()
        child.wait(timeout=60)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def test_ctrl_c_says_how_far_it_got_and_the_line_for_the_rest(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(url)
    done = _interrupted(["db", "prune", "--database-url", url, "--older-than", "30m"])
    assert done.returncode == 130, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    head = lines[0]
    assert head.startswith("pruned ") and "done " in head, done.stdout
    pruned = int(head.split()[1])
    assert 1 <= pruned < ROWS, done.stdout
    assert lines[-2].startswith("interrupted after "), done.stdout
    rest = command_words(lines[-1])
    assert rest[1:] == ["db", "prune", "--older-than", "30m", "--database-url", url], lines[-1]
    # The line for the rest prunes the rest.
    assert main([*rest[1:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["by_state"]["done"] == ROWS - pruned


def test_under_json_the_envelope_says_it_was_interrupted(url: str) -> None:
    _seed(url)
    done = _interrupted(["db", "prune", "--database-url", url, "--older-than", "30m", "--json"])
    assert done.returncode == 130, (done.returncode, done.stdout, done.stderr)
    envelope = json.loads(done.stdout)
    assert envelope["interrupted"] is True and envelope["more"] is True, envelope
    assert 1 <= envelope["by_state"]["done"] < ROWS, envelope
    assert command_words(envelope["act_command"])[1:3] == ["db", "prune"], envelope
