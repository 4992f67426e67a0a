"""Malformed JSON-RPC over streamable HTTP answered as stdio answers it, and a request whose
params have the wrong shape (tools/call `arguments` as text, no `name`; resources/read of a
template's empty slot) refused with a named, typed error: no pydantic dump, no -32603."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from mcp_jobs.server.json_rpc_text import parse_line
from mcp_jobs.server.request_ids import NOT_JSON_RPC
from tests.mcp.test_http_hardening import TOKEN, _in_session, _open_session, _settings, running

MALFORMED: list[Any] = [
    [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
    None,
    5,
    {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1, "method": 5},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]},
]


async def _post(http: httpx2.AsyncClient, url: str, session: str, body: Any) -> httpx2.Response:
    content = json.dumps(body)
    return await http.post(url, content=content, headers=_in_session(session))


def _answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer, sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        answer: dict[str, Any] = json.loads(data[-1])
        return answer
    answer = response.json()
    return answer


async def test_malformed_messages_are_answered_as_on_stdio() -> None:
    authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    async with running(_settings(host="127.0.0.1")) as listening, authorized as http:
        session = await _open_session(http, listening.url)
        for body in MALFORMED:
            answer = await _post(http, listening.url, session, body)
            assert answer.status_code == 400, (body, answer.text)
            error = answer.json()["error"]
            on_stdio = parse_line(json.dumps(body).encode())
            assert not hasattr(on_stdio, "message")
            assert error == on_stdio.error.model_dump(exclude_none=True), body  # type: ignore[union-attr]
            assert error["code"] == -32600 and error["message"] == NOT_JSON_RPC
            assert "pydantic" not in answer.text


BAD_PARAMS: list[tuple[str, dict[str, Any], str]] = [
    ("tools/call", {"name": "list_jobs", "arguments": "{}"}, "arguments"),
    ("tools/call", {"name": "list_jobs", "arguments": [1]}, "arguments"),
    ("tools/call", {"arguments": {}}, "name"),
    ("tools/call", {"name": None}, "name"),
    ("prompts/get", {"name": "diagnose_stalled_jobs", "arguments": "{}"}, "arguments"),
    ("resources/read", {}, "uri"),
    (
        "completion/complete",
        {"ref": {"type": "ref/tool"}, "argument": {"name": "queue", "value": ""}},
        "ref.type",
    ),
]


@pytest.mark.parametrize(("method", "params", "named"), BAD_PARAMS)
async def test_params_of_the_wrong_shape_get_a_named_error(
    method: str, params: dict[str, Any], named: str
) -> None:
    authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    async with running(_settings(host="127.0.0.1")) as listening, authorized as http:
        session = await _open_session(http, listening.url)
        await _post(
            http, listening.url, session, {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}
        error = _answer(await _post(http, listening.url, session, body))["error"]
        assert error["code"] == -32602, error
        data = error["data"]
        assert data["code"] == "INVALID_ARGUMENT" and data["retryable"] is False, data
        assert data["details"]["argument"] == f"params.{named}", data
        assert named in error["message"] and data["cause"] and data["fix"]
        if params.get("arguments") == "{}":
            assert "JSON object" in data["cause"]
            assert data["fix"] == f"{method} {json.dumps({**params, 'arguments': {}})}"


@pytest.mark.parametrize("uri", ["jobs://runs/", "jobs://descriptors/", "jobs://runs/nope"])
async def test_a_bad_resource_uri_is_bad_input_with_the_typed_payload(uri: str) -> None:
    authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    async with running(_settings(host="127.0.0.1")) as listening, authorized as http:
        session = await _open_session(http, listening.url)
        await _post(
            http, listening.url, session, {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        body = {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": uri}}
        error = _answer(await _post(http, listening.url, session, body))["error"]
        assert error["code"] == -32602, error
        assert {"code", "cause", "fix"} <= set(error["data"]), error


async def test_a_run_uri_holding_an_id_in_capitals_names_the_uri_of_that_id() -> None:
    authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
    async with running(_settings(host="127.0.0.1")) as listening, authorized as http:
        session = await _open_session(http, listening.url)
        await _post(
            http, listening.url, session, {"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        made = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {
                "name": "enqueue_job",
                "arguments": {"name": "greet", "input": {"user_id": 1}},
            },
        }
        job_id = _answer(await _post(http, listening.url, session, made))["result"][
            "structuredContent"
        ]["job_id"]
        uri = f"jobs://runs/{job_id.upper()}"
        body = {"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"uri": uri}}
        error = _answer(await _post(http, listening.url, session, body))["error"]
        assert error["code"] == -32602
        assert error["data"]["fix"] == f'resources/read {{"uri": "jobs://runs/{job_id}"}}'
