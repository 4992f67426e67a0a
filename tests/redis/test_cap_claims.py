"""The conformance kit's test_cap_claims (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_cap_claims import *  # noqa: F403
