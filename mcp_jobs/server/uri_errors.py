"""The JSON-RPC error a request about a resource URI answers (resources/read,
resources/subscribe): bad input, -32602, never -32603 (a server fault, which clients retry),
with the typed payload every refusal carries in `data` (code, cause, fix)."""

from __future__ import annotations

import json
from urllib.parse import quote

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from engine.errors import JobNotFoundError, JobsError, JobUnknownError
from mcp_jobs.operations.envelope import bounded_text
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.followed import RUN_PREFIX

DESCRIPTOR_PREFIX = "jobs://descriptors/"


def uri_refusal(exc: JobsError, method: str, uri: str | None, scope: Scope | None) -> MCPError:
    """`exc` as the -32602 answering `method` for `uri`: a run whose id `uri` holds in another
    shape (capitals, spaces) asked for by its id, a descriptor by the name its misspelt one
    stands for; else its fix written for this server's database and app (`scope`'s: a bare
    command reads another)."""
    inner = exc.meant_id if isinstance(exc, JobNotFoundError) else None
    meant = (exc.details or {}).get("meant") if isinstance(exc, JobUnknownError) else None
    if uri is not None and uri.startswith(RUN_PREFIX) and inner is not None:
        exc.fix = f'{method} {{"uri": "{RUN_PREFIX}{inner}"}}'
    elif uri is not None and uri.startswith(DESCRIPTOR_PREFIX) and isinstance(meant, str):
        exc.fix = f"{method} {json.dumps({'uri': DESCRIPTOR_PREFIX + quote(meant, safe='')})}"
    elif scope is not None:
        exc.fix = scope.fixes.qualify(exc.fix)
    payload = exc.to_payload().model_dump(mode="json", exclude_none=True)
    where = f"{uri}: " if uri is not None else ""
    message = bounded_text(f"{where}{exc.code}: {exc.cause} (fix: {exc.fix})")
    return MCPError(INVALID_PARAMS, message, payload)
