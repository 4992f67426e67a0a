"""The conformance kit's test_cut_short_id (engine/testing/kit) on the Redis driver."""

from engine.testing.kit.test_cut_short_id import *  # noqa: F403
