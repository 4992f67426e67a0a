"""The conformance kit's test_task_claims (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_task_claims import *  # noqa: F403
