"""tests/conformance/test_shared_queue.py on the NATS driver."""

from tests.conformance.test_shared_queue import *  # noqa: F403
