"""Each OAuth setting's `serve` flag is spelled in one place (`config.oauth_flag`), and it is the
flag the parser takes: a refusal of an OAuth setting given by flag names that flag, so the line
that leaves it out (or adds the issuer) runs. A setting given without an issuer is refused, not
ignored."""

from __future__ import annotations

import pytest

from engine.errors import InvalidArgumentError
from mcp_jobs.cli.parser import build_parser
from mcp_jobs.config import OAUTH_ISSUER_ENV, OAUTH_SETTINGS, oauth_flag, read_oauth
from mcp_jobs.errors import OAuthSettingInvalidError
from tests.cli.serve_support import no_settings_env

__all__ = ["no_settings_env"]  # the autouse fixture, active where imported

NAMES = OAUTH_SETTINGS
OTHERS = [name for name in NAMES if name != "issuer"]


def test_the_settings_are_the_six_serve_documents() -> None:
    assert set(NAMES) == {
        "issuer",
        "audience",
        "jwks_url",
        "resource_url",
        "algorithms",
        "tenant_claim",
    }


@pytest.mark.parametrize("name", NAMES)
def test_each_settings_flag_is_one_the_serve_parser_takes(name: str) -> None:
    args = build_parser().parse_args(["serve", "--transport", "http", oauth_flag(name), "x"])
    assert getattr(args, f"oauth_{name}") == "x"


@pytest.mark.parametrize("name", OTHERS)
def test_a_flag_given_without_an_issuer_is_refused_naming_it_not_ignored(name: str) -> None:
    with pytest.raises(InvalidArgumentError) as refusal:
        read_oauth({name: "x"}, "127.0.0.1", 8765)
    assert refusal.value.argument == oauth_flag(name)
    assert oauth_flag("issuer") in refusal.value.cause


@pytest.mark.parametrize("name", NAMES)
def test_a_blank_flag_is_refused_naming_it(name: str) -> None:
    with pytest.raises(InvalidArgumentError) as refusal:
        read_oauth({name: " "}, "127.0.0.1", 8765)
    assert refusal.value.argument == oauth_flag(name)


@pytest.mark.parametrize("name", OTHERS)
def test_a_variable_given_without_an_issuer_is_refused_naming_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    variable = f"MCP_JOBS_OAUTH_{name.upper()}"
    monkeypatch.setenv(variable, "x")
    with pytest.raises(OAuthSettingInvalidError) as refusal:
        read_oauth({}, "127.0.0.1", 8765)
    assert refusal.value.fix == f"unset {variable}" and OAUTH_ISSUER_ENV in refusal.value.cause
