"""The conformance kit's test_backfill_ledger (engine/testing/kit) on the NATS driver."""

from engine.testing.kit.test_backfill_ledger import *  # noqa: F403
