"""The conformance kit's test_prefetch (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_prefetch import *  # noqa: F403
