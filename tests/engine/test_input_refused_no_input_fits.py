"""An input past the engine's bound on a driver whose record holds no input at all (a NATS
server with a tiny max_payload): the fix is the driver's setting alone. "Send an input of at
most 0 bytes of JSON, or ..." offered a first branch no input can follow."""

from __future__ import annotations

from engine.bounds import PAYLOAD_ENV
from engine.drivers.base import RecordNeeds
from engine.enqueue_items import input_refused

SETTING = "set max_payload: 2097152 in nats-server's config and restart it"


def test_a_record_that_holds_no_input_is_fixed_by_its_setting_alone() -> None:
    needs = RecordNeeds(most=0, reason="its max_payload is 4096 bytes", setting=SETTING, details={})
    refused = input_refused(1_500_000, 1_048_576, needs)
    assert refused.fix == f"{SETTING}, then export {PAYLOAD_ENV}=1500000"


def test_a_record_that_holds_a_smaller_input_keeps_both_branches() -> None:
    needs = RecordNeeds(most=500_000, reason="its max_payload", setting=SETTING, details={})
    refused = input_refused(1_500_000, 1_048_576, needs)
    assert refused.fix.startswith("send an input of at most 500000 bytes of JSON, or ")
