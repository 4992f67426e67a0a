"""tests/conformance/test_untimed_claims.py on the NATS driver."""

from tests.conformance.test_untimed_claims import *  # noqa: F403
