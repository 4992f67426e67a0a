"""`mcp-jobs dashboard`: the web dashboard (mcp_jobs/dashboard) on its own port.

Read-only with `--read-only`; on loopback (the default host) it asks no token, beyond loopback
it needs the HTTP server's token (HTTP_TOKEN_REQUIRED, HTTP_TOKEN_TOO_SHORT, checked before the
database opens). The socket is bound here, so a busy port is HTTP_BIND_FAILED with its fix, and
`dashboard at http://HOST:PORT/` is printed on stderr once the app has started. A database that
does not answer yet does not stop the start (as `serve`): the pages answer 503 with Retry-After
until it does, and it is migrated then.
"""

from __future__ import annotations

import argparse
import logging

from mcp_jobs.cli.commands import open_jobs
from mcp_jobs.cli.mend import print_failure
from mcp_jobs.config import Settings


async def dashboard_command(args: argparse.Namespace, settings: Settings) -> int:
    # Imported here: uvicorn and starlette are not worth loading for the other commands.
    from engine.logs import configure_logging
    from mcp_jobs.cli.database_wait import migrated_or_retrying
    from mcp_jobs.cli.serve import token_file_warning
    from mcp_jobs.config import http_settings
    from mcp_jobs.dashboard.auth import standalone_auth
    from mcp_jobs.dashboard.serve import serve_dashboard
    from mcp_jobs.server.http_serve import bind

    try:
        settings = http_settings(
            settings, token_file=args.token_file, allowed_hosts=args.allowed_host
        )
        auth = standalone_auth(settings)  # refused before anything opens or listens
        exposed = token_file_warning(settings)
        configure_logging(json=args.log_format == "json", level=args.log_level)
        if exposed is not None:
            logging.getLogger("mcp_jobs.cli").warning("%s", exposed)
        sock = bind(settings.host, settings.port)
        try:
            async with (
                open_jobs(settings, migrate=False, creates=True) as jobs,
                migrated_or_retrying(jobs, answers="pages"),
            ):
                await serve_dashboard(settings, jobs, auth, sock)
        finally:
            sock.close()
    except Exception as exc:  # shown as code/cause/fix, not a traceback
        return print_failure(exc, settings, "mcp-jobs dashboard")
    return 0
