"""STEP_UNKNOWN proposes no rerun as its next_call (a rerun is a write, and a guessed one is shown
only): the next call reads the job's steps, and the fix is the rerun from the step the name plainly
stands for, when there is one."""

from __future__ import annotations

from engine.errors import RerunStepUnknownError

STEPS = ["start", "batch-1", "batch-2", "finish"]


def test_another_spelling_of_a_step_is_the_fix_shown_only() -> None:
    error = RerunStepUnknownError("j1", "r1", "Batch-1", STEPS)
    assert "meant batch-1?" in error.cause and error.details is not None
    assert error.details["meant"] == "batch-1"
    assert error.fix == "mcp-jobs jobs retry j1 --from-step batch-1"
    assert error.next_call is not None
    assert error.next_call.model_dump() == {"tool": "inspect_job", "arguments": {"job_id": "j1"}}


def test_a_step_that_stands_for_none_is_never_rerun_from_the_first() -> None:
    for step, steps in (("batch-9", STEPS), ("x", []), ("wrap", ["pick", "pack"])):
        error = RerunStepUnknownError("j1", "r1", step, steps)
        assert error.details is not None and "meant" not in error.details
        assert error.fix == "mcp-jobs jobs show j1 --json"
        assert error.next_call is not None
        assert error.next_call.model_dump() == {
            "tool": "inspect_job",
            "arguments": {"job_id": "j1"},
        }
