"""What the NATS driver tells the engine a value needs of the server (engine/drivers/nats/
max_payload.py), and the one fix the engine makes of it where its own bound refuses the value
(engine/steps.py `mend_output`, engine/enqueue_items.py `input_refused`): the export alone
where this server holds the value, the max_payload too where it does not, and plainly that no
NATS server can where the value is past nats-server's own limit."""

from __future__ import annotations

from engine.bounds import PAYLOAD_CEILING, PAYLOAD_ENV
from engine.drivers.base import RecordNeeds
from engine.drivers.nats.max_payload import SERVER_CEILING, output_fix, output_needs
from engine.enqueue_items import input_refused
from engine.errors import JobOutputTooLargeError
from engine.steps import mend_output
from schemas.jobs import EnqueueRequest

MIB = 1024 * 1024
ROOM = 64 * 1024


class _Server:
    """A driver whose job value is bounded as a NATS server's of `max_payload` is."""

    def __init__(self, max_payload: int, held: int = 1000) -> None:
        self.max_payload = max_payload
        self.held = held

    def input_needs(self, request: EnqueueRequest) -> RecordNeeds | None:
        return None

    def output_needs(self, job_id: str, size: int) -> RecordNeeds | None:
        return output_needs(self.held, size, ROOM, self.max_payload)


def _bound_error(size: int) -> JobOutputTooLargeError:
    return JobOutputTooLargeError("j", 'step "s"', size, MIB, PAYLOAD_ENV, PAYLOAD_CEILING)


def test_a_value_this_server_holds_keeps_the_export_alone() -> None:
    assert output_needs(1000, 2 * MIB, ROOM, 8 * MIB) is None
    error = _bound_error(2 * MIB)
    mend_output(error, _Server(8 * MIB), "job")
    assert error.fix == f"export {PAYLOAD_ENV}={2 * MIB}"
    assert error.details is not None and "max_payload" not in error.details


def test_a_value_past_this_server_names_its_max_payload_and_the_export() -> None:
    error = _bound_error(2 * MIB)
    mend_output(error, _Server(MIB), "job")
    assert error.details is not None
    wanted = error.details["max_payload"]
    assert isinstance(wanted, int) and 2 * MIB + ROOM + 1000 < wanted <= SERVER_CEILING
    assert error.fix == (
        f"set max_payload: {wanted} in nats-server's config and restart it, "
        f"then export {PAYLOAD_ENV}={2 * MIB}"
    )


def test_a_value_past_any_nats_server_says_none_can_hold_it() -> None:
    error = _bound_error(SERVER_CEILING)
    mend_output(error, _Server(MIB), "job")
    assert "export" not in error.fix and "max_payload" in error.fix
    assert error.fix.startswith('return from step "s" a reference to the data')
    assert error.details is not None and "max_payload" not in error.details
    assert output_fix("the job", SERVER_CEILING + 1).startswith("return from the job a reference")


def test_a_driver_whose_record_is_not_bounded_leaves_the_error_as_raised() -> None:
    error = _bound_error(2 * MIB)
    mend_output(error, object(), "job")
    assert error.fix == f"export {PAYLOAD_ENV}={2 * MIB}"


def test_an_input_past_any_nats_server_names_only_a_smaller_input() -> None:
    needs = RecordNeeds(900_000, "no server holds it", None, {})
    error = input_refused(SERVER_CEILING + 1, MIB, needs)
    assert error.fix == "send an input of at most 900000 bytes of JSON (no server holds it)"
    assert error.details is not None and error.details["bound"] == 900_000
