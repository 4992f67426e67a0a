"""A URL naming a node of a Redis Cluster, which the driver does not support (its scripts touch
keys of many hash slots): a URL to correct, DATABASE_URL_INVALID and not retried, and `db
report` says so. It was DRIVER_UNAVAILABLE (retried without end) for a MOVED reply, with a
report blaming the server's loading or its ACL. Checked on the replies a cluster gives (a live
two-node cluster answered each of these)."""

from __future__ import annotations

import pytest

from engine.driver_errors import DatabaseUrlInvalidError, DriverUnavailableError

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis.exceptions import (
    ClusterCrossSlotError,
    ClusterDownError,
    MasterDownError,
    MovedError,
)

from engine.drivers.redis import report
from engine.drivers.redis.connection import converted

URL = "redis://127.0.0.1:7000/0"
FIX = f"mcp-jobs db report --database-url {URL}"


@pytest.mark.parametrize(
    "reply",
    [
        MovedError("5351 127.0.0.1:7001"),
        ClusterDownError("The cluster is down"),
        ClusterCrossSlotError("Keys in request don't hash to the same slot"),
    ],
)
def test_a_cluster_node_is_a_url_to_correct_and_the_report_says_cluster(
    reply: Exception,
) -> None:
    error = converted(reply, URL, FIX)
    assert isinstance(error, DatabaseUrlInvalidError)
    assert not error.retryable and "Redis Cluster" in error.cause
    lines = report._unreachable(URL, reply)
    assert any("Redis Cluster" in line for line in lines)


def test_a_replica_cut_off_from_its_primary_is_still_unavailable() -> None:
    # MASTERDOWN is a ClusterDownError to redis-py, but a replica's: it passes.
    error = converted(MasterDownError("Link with MASTER is down"), URL, FIX)
    assert isinstance(error, DriverUnavailableError) and error.retryable
