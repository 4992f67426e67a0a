"""tests/conformance/test_worker_cancelled.py on the Redis driver."""

from tests.conformance.test_worker_cancelled import *  # noqa: F403
