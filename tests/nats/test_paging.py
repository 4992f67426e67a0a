"""The conformance kit's test_paging (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_paging import *  # noqa: F403
