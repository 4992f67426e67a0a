"""Credentials masked in free text a failure carries (a job body's exception message, its
traceback): a URL's password or token (`redact`, the home of which parts of a URL are secret),
an `Authorization` value or `Bearer` token, and a `password=` / `token=` pair (a keyword DSN).

Only what can be recognised is masked; it runs on the failure path only, a few regular
expressions over text already bounded for storage.
"""

from __future__ import annotations

import re

from engine.drivers.urls import MASKED_PARAMS, redact

MASK = "***"

# A scheme starts where no scheme character stands before it, and is short: a long run of letters
# is then one try, not one from each of its letters (which made a 200,000-letter message 38 s).
_URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s'\"<>]+")
# What `redact` cannot split (a broken IPv6 host): the user part, its name kept when it has one.
_USERINFO = re.compile(r"(?<=://)(?:([^\s/:@]*):)?[^\s/]*@")
_BEARER = re.compile(r"\b(bearer\s+)[A-Za-z0-9._~+/-]+=*", re.IGNORECASE)
# An `Authorization: <scheme> <credentials>` header, or one with the credentials alone.
_AUTHORIZATION = re.compile(
    r"\b(authorization\s*[:=]\s*)((?:basic|bearer|digest|token)\s+)?[^\s'\",;]+",
    re.IGNORECASE,
)
_PAIR = re.compile(
    rf"\b({'|'.join(sorted(MASKED_PARAMS))})=('[^']*'|\"[^\"]*\"|[^\s&;,'\"]+)", re.IGNORECASE
)


def scrubbed(text: str) -> str:
    """`text` with every credential it recognisably carries replaced by `***`; text with none
    (or already masked) comes back unchanged."""
    text = _URL.sub(_url, text)
    text = _BEARER.sub(rf"\g<1>{MASK}", text)
    text = _AUTHORIZATION.sub(_authorization, text)
    return _PAIR.sub(rf"\g<1>={MASK}", text)


def _url(found: re.Match[str]) -> str:
    url = found.group()
    try:
        return redact(url)
    except ValueError:
        return _USERINFO.sub(_userinfo, url, count=1)


def _userinfo(found: re.Match[str]) -> str:
    user = found.group(1)
    return f"{user}:{MASK}@" if user is not None else f"{MASK}@"


def _authorization(found: re.Match[str]) -> str:
    return f"{found.group(1)}{found.group(2) or ''}{MASK}"


__all__ = ["MASK", "scrubbed"]
