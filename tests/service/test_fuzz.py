"""Arbitrary bodies never make the service fail: every answer is a result or a 4xx problem."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.service.helpers import create_ladder

NAMES = st.sampled_from(["a", "b", "c", "d", "e", "", "x" * 129, "\x00", "é"])
NUMBERS = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=5)),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)
TEAMS = st.one_of(
    st.lists(st.lists(NAMES, min_size=0, max_size=3), min_size=0, max_size=4),
    JSON,
)
BODIES = st.fixed_dictionaries(
    {"teams": TEAMS},
    optional={
        "ranks": st.one_of(st.lists(NUMBERS, max_size=4), JSON),
        "scores": st.lists(NUMBERS, max_size=4),
        "weights": st.lists(st.lists(NUMBERS, max_size=3), max_size=4),
        "match_id": st.one_of(NAMES, NUMBERS),
        "played_at": st.one_of(
            st.sampled_from(["2026-01-01", "2026-01-01T00:00:00+14:00", "9999-12-31T23:59:59Z"]),
            st.text(max_size=8),
            NUMBERS,
        ),
        "meta": JSON,
        "rank": JSON,
    },
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=BODIES)
def test_any_match_body_is_a_result_or_a_problem(client: TestClient, body: dict[str, Any]) -> None:
    if client.get("/v1/ladders/fuzz").status_code == 404:
        create_ladder(client, "fuzz", params={"tau_per_day": 0.1})
    response = client.post(
        "/v1/ladders/fuzz/matches",
        content=json.dumps(body).encode(),  # NaN and Infinity too, as some clients send them
        headers={"content-type": "application/json"},
    )
    assert response.status_code in (200, 201, 409, 422), response.text
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/problem+json")
    else:
        match_id = response.json()["match_id"]
        stored = client.get(f"/v1/ladders/fuzz/matches/{match_id}")
        assert stored.content == response.content
