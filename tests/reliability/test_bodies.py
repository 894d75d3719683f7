"""Who may send a body: a request that needs a key and has none, or asks for no route, is
answered without its body being read (the client has sent one kilobyte of sixteen
megabytes when the answer comes); a keyless body has its own, small limit; a made-up key
costs no more than none; and authentication comes before any look at the body."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from tests.reliability.conftest import Server
from tests.service.helpers import assert_problem

#: What the client declares, of which it sends only the start before waiting for an answer.
DECLARED = 16_000_000


def _answer_before_the_body(
    server: Server, method: str, path: str, sent: int, key: str = ""
) -> str:
    """The status line the server answers after ``sent`` bytes of a declared
    :data:`DECLARED`-byte JSON body, the rest never sent."""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {DECLARED}\r\n"
        + (f"Authorization: Bearer {key}\r\n" if key else "")
        + "\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as connection:
        connection.sendall(head + b"[" + b"1," * (sent // 2))
        received = b""
        while b"\r\n" not in received:
            chunk = connection.recv(65536)
            assert chunk, "the server closed the connection without an answer"
            received += chunk
    return received.split(b"\r\n", 1)[0].decode()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/v1/ladders/x/matches", 401),
        ("POST", "/v1/ladders/x/matches/batch", 401),
        ("PATCH", "/v1/ladders/x", 401),
        ("POST", "/v1/ladders", 401),
        ("POST", "/no/such/route", 404),
        ("POST", "/healthz", 405),
        ("POST", "/v1/ladders/x/quality", 413),  # an open route: over the keyless limit
    ],
)
def test_a_keyless_body_is_answered_unread(
    start_server: Callable[..., Server], method: str, path: str, status: int
) -> None:
    server = start_server()
    line = _answer_before_the_body(server, method, path, sent=1024)
    assert line.startswith(f"HTTP/1.1 {status} "), line


def test_a_made_up_key_is_refused_once_its_body_outgrows_a_keyless_one(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    line = _answer_before_the_body(
        server, "POST", "/v1/ladders/x/matches/batch", sent=300 * 1024, key="rk_made_up"
    )
    assert line.startswith("HTTP/1.1 401 "), line
    # A real key's body is read on (the server waits for the rest: no answer yet).
    head = (
        "POST /v1/ladders/x/matches/batch HTTP/1.1\r\nHost: h\r\n"
        f"Content-Type: application/json\r\nContent-Length: {DECLARED}\r\n"
        f"Authorization: Bearer {server.key}\r\n\r\n"
    ).encode()
    with (
        pytest.raises(TimeoutError),
        socket.create_connection(("127.0.0.1", server.port), timeout=2) as connection,
    ):
        connection.sendall(head + b" " * (300 * 1024))
        connection.recv(65536)


@pytest.mark.parametrize(
    "body",
    [b'{"teams": [["a"], ["b"]], "teams": [["c"], ["d"]]}', b'{"teams": "\xff"}', b"{not json"],
    ids=["duplicate key", "not UTF-8", "not JSON"],
)
def test_authentication_comes_before_the_body(app_client: TestClient, body: bytes) -> None:
    headers = {"Content-Type": "application/json"}
    keyless = app_client.post(
        "/v1/ladders/x/matches", content=body, headers={**headers, "Authorization": ""}
    )
    assert_problem(keyless, 401, "Authorization")
    with_key = app_client.post("/v1/ladders/x/matches", content=body, headers=headers)
    assert with_key.status_code == 422, with_key.text


def test_a_keyless_body_of_an_open_route_has_its_own_limit(app_client: TestClient) -> None:
    teams = {"teams": [[f"p{n:0120}" for n in range(128)], [f"q{n:0120}" for n in range(128)]]}
    # The contract's largest quality query (256 players of 121 characters) fits.
    response = app_client.post("/v1/ladders/x/quality", json=teams, headers={"Authorization": ""})
    assert_problem(response, 404, "ladder")
    too_large = app_client.post(
        "/v1/ladders/x/quality", content=b" " * (256 * 1024 + 1), headers={"Authorization": ""}
    )
    assert "without a key" in assert_problem(too_large, 413)
