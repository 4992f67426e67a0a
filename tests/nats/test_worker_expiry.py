"""The conformance kit's test_worker_expiry (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_worker_expiry import *  # noqa: F403
