"""The conformance kit's test_cap_claims (engine/testing/kit) over every driver."""

from engine.testing.kit.test_cap_claims import *  # noqa: F403
