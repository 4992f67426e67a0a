"""tests/conformance/test_close_under_worker.py on the NATS driver."""

from tests.conformance.test_close_under_worker import *  # noqa: F403
