"""The fix stored for the engine's output bound on NATS (engine/drivers/nats/max_payload.py):
left as it is where this server holds the value, naming the max_payload too where it does not,
and saying plainly that no NATS server can where the value is past nats-server's own limit."""

from __future__ import annotations

from engine.bounds import PAYLOAD_ENV
from engine.drivers.nats.max_payload import SERVER_CEILING, for_this_server, output_fix
from schemas.errors import ErrorPayload

MIB = 1024 * 1024
ROOM = 64 * 1024


def _bound_error(size: int) -> ErrorPayload:
    return ErrorPayload(
        code="JOB_OUTPUT_INVALID",
        title="t",
        cause="c",
        fix=f"export {PAYLOAD_ENV}={size}",
        retryable=False,
        details={"job": "j", "origin": 'step "s"', "size": size, "bound": MIB},
    )


def test_a_value_this_server_holds_keeps_the_export_alone() -> None:
    error = _bound_error(2 * MIB)
    assert for_this_server(error, lambda: 1000, ROOM, 8 * MIB) is error


def test_a_value_past_this_server_names_its_max_payload_and_the_export() -> None:
    error = for_this_server(_bound_error(2 * MIB), lambda: 1000, ROOM, MIB)
    assert error is not None and error.details is not None
    wanted = error.details["max_payload"]
    assert 2 * MIB + ROOM + 1000 < wanted <= SERVER_CEILING
    assert error.fix == (
        f"set max_payload: {wanted} in nats-server's config and restart it, "
        f"then export {PAYLOAD_ENV}={2 * MIB}"
    )


def test_a_value_past_any_nats_server_says_none_can_hold_it() -> None:
    error = for_this_server(_bound_error(SERVER_CEILING), lambda: 1000, ROOM, MIB)
    assert error is not None
    assert "export" not in error.fix and "max_payload" in error.fix
    assert error.fix.startswith('return from step "s" a reference to the data')
    assert output_fix("the job", SERVER_CEILING + 1).startswith("return from the job a reference")


def test_another_error_is_stored_as_it_is() -> None:
    error = _bound_error(2 * MIB).model_copy(update={"code": "JOB_FAILED"})
    assert for_this_server(error, lambda: 1000, ROOM, MIB) is error
    assert for_this_server(None, lambda: 1000, ROOM, MIB) is None
