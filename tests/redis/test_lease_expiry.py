"""The conformance kit's test_lease_expiry (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_lease_expiry import *  # noqa: F403
