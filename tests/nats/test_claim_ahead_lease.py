"""tests/engine/test_worker_claim_ahead_lease.py (a job claimed ahead whose lease ran out is not
started) on the NATS driver."""

from tests.engine.test_worker_claim_ahead_lease import *  # noqa: F403
