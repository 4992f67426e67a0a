"""The audit trail, for the server's modules: it lives in `mcp_jobs.operations.audit`, beside the
operations, because a bulk action writes its own event from the CLI as well."""

from __future__ import annotations

from mcp_jobs.operations.audit import AUDIT_EVENT, Subject, audit_value, record_call

__all__ = ["AUDIT_EVENT", "Subject", "audit_value", "record_call"]
