"""tests/conformance/test_worker_cancelled.py on the NATS driver."""

from tests.conformance.test_worker_cancelled import *  # noqa: F403
