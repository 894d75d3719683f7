"""Webhooks: receivers registered, listed and deleted by an admin; each event of the types
a receiver asked for POSTed to it, signed, in order per ladder, retried with backoff on an
error or a timeout, then marked failed; deliveries listed with status, attempts and the
last error; a receiver that hangs holds back only its own deliveries."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.services import webhooks
from app.storage import unit_of_work
from app.storage.engine import get_engine, session_factory
from app.storage.models import WebhookDelivery
from app.storage.repositories import webhooks as hook_repo
from tests.service.helpers import assert_problem, create_ladder, post_match, table_counts
from tests.service.receiver import Receiver, receiver
from tests.service.test_access import _key

OWNER = "test-worker"


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's own dispatcher never ticks: the tests deliver step by step."""
    monkeypatch.setenv("RATINGS_WEBHOOK_POLL_S", "3600")


@pytest.fixture
def hooks(quiet: None, client: TestClient) -> TestClient:
    return client


@pytest.fixture
def target() -> Iterator[Receiver]:
    with receiver() as state:
        yield state


def _register(client: TestClient, url: str, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/webhooks", json={"url": url, "events": ["match.recorded"], **body})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _deliver(database_url: str, *, clock: datetime | None = None, timeout: float = 5.0) -> int:
    """One worker's round, as its dispatcher runs it: lease every receiver, send each its
    due events."""
    transact = unit_of_work.transactor(session_factory(get_engine(database_url)))
    now = clock or datetime.now(UTC)
    hooks = transact(
        lambda session: hook_repo.claim(
            session=session, owner=OWNER, now=now, until=now + timedelta(seconds=30)
        )
    )
    send = webhooks.http_sender(timeout)
    return sum(
        webhooks.deliver(transact=transact, hook=hook, owner=OWNER, send=send, clock=lambda: now)
        for hook in hooks
    )


def _deliveries(client: TestClient, hook_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/webhooks/{hook_id}/deliveries", params={"limit": 1000})
    assert response.status_code == 200, response.text
    deliveries: list[dict[str, Any]] = response.json()["deliveries"]
    return deliveries


def test_each_event_is_posted_signed_in_order(
    hooks: TestClient, database_url: str, target: Receiver
) -> None:
    create_ladder(hooks, "a")
    create_ladder(hooks, "b")
    post_match(hooks, "a", {"match_id": "before", "teams": [["x"], ["y"]]})
    hook = _register(hooks, target.url, events=["match.recorded", "match.voided"])
    assert hook["secret"].startswith("whsec_") and hook["ladders"] is None
    for n in range(5):
        post_match(hooks, "a", {"match_id": f"a{n}", "teams": [["x"], [f"y{n}"]]})
        post_match(hooks, "b", {"match_id": f"b{n}", "teams": [["x"], [f"y{n}"]]})
    hooks.delete("/v1/ladders/a/matches/a1")
    hooks.post("/v1/ladders/a/seasons", json={"id": "s2"})  # a type it did not ask for

    assert _deliver(database_url) == 11
    feed = {
        ladder: [e for e in hooks.get(f"/v1/ladders/{ladder}/events").json()["events"]]
        for ladder in ("a", "b")
    }
    bodies = target.bodies()
    # Every event it asked for, written after it was registered, exactly as the feed has it,
    # in order per ladder.
    for ladder in ("a", "b"):
        expected = [
            e
            for e in feed[ladder]
            if e["type"] != "season.started" and e["data"].get("match_id") != "before"
        ]
        assert [b for b in bodies if b["ladder"] == ladder] == expected
    for request in target.received:
        assert request.path == "/hooks"
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["Ratings-Event-Id"] == json.loads(request.body)["id"]
        t, v1 = (part.split("=", 1)[1] for part in request.headers["Ratings-Signature"].split(","))
        mac = hmac.new(hook["secret"].encode(), f"{t}.".encode() + request.body, hashlib.sha256)
        assert hmac.compare_digest(v1, mac.hexdigest())
    assert len({r.headers["Ratings-Event-Id"] for r in target.received}) == 11
    # Nothing is sent twice.
    assert _deliver(database_url) == 0
    assert len(target.received) == 11
    delivered = _deliveries(hooks, hook["id"])
    assert len(delivered) == 11
    assert {d["status"] for d in delivered} == {"delivered"}
    assert {d["attempts"] for d in delivered} == {1}


def test_a_receiver_of_some_ladders_gets_theirs_alone(
    hooks: TestClient, database_url: str, target: Receiver
) -> None:
    create_ladder(hooks, "a")
    create_ladder(hooks, "b")
    _register(hooks, target.url, ladders=["b"])
    post_match(hooks, "a", {"teams": [["x"], ["y"]]})
    post_match(hooks, "b", {"teams": [["x"], ["y"]]})
    assert _deliver(database_url) == 1
    assert [b["ladder"] for b in target.bodies()] == ["b"]


def test_a_failing_receiver_is_retried_with_backoff_then_given_up(
    hooks: TestClient, database_url: str, target: Receiver
) -> None:
    create_ladder(hooks, "a")
    hook = _register(hooks, target.url)
    for n in range(3):
        post_match(hooks, "a", {"match_id": f"m{n}", "teams": [["x"], [f"y{n}"]]})
    start = datetime.now(UTC)
    target.status = 503
    assert _deliver(database_url, clock=start) == 0
    (first,) = _deliveries(hooks, hook["id"])
    assert first["status"] == "retrying" and first["attempts"] == 1
    assert first["last_error"] == "HTTP 503"
    assert first["next_attempt_at"] is not None
    # Not due yet: nothing is sent, the later events wait behind it.
    assert _deliver(database_url, clock=start + timedelta(milliseconds=500)) == 0
    assert _deliveries(hooks, hook["id"])[0]["attempts"] == 1
    # Due: tried again, the wait doubled.
    assert _deliver(database_url, clock=start + timedelta(seconds=1)) == 0
    second = _deliveries(hooks, hook["id"])[0]
    assert second["attempts"] == 2
    waits = datetime.fromisoformat(second["next_attempt_at"]) - datetime.fromisoformat(
        second["last_attempt_at"]
    )
    assert waits == timedelta(seconds=2)
    # The receiver is back: the held event goes first, then the rest, in order.
    target.status = 200
    assert _deliver(database_url, clock=start + timedelta(seconds=3)) == 3
    assert [b["data"]["match_id"] for b in target.bodies()] == ["m0", "m1", "m2"]
    statuses = {d["event_id"]: d for d in _deliveries(hooks, hook["id"])}
    assert sorted(d["attempts"] for d in statuses.values()) == [1, 1, 3]

    # Down for longer than the retry period: marked failed, and the next events go.
    target.status = 500
    post_match(hooks, "a", {"match_id": "lost", "teams": [["x"], ["z"]]})
    later = start + timedelta(minutes=1)
    _deliver(database_url, clock=later)
    _deliver(database_url, clock=later + timedelta(days=1, seconds=1))  # failing still
    target.status = 200
    post_match(hooks, "a", {"match_id": "after", "teams": [["x"], ["z"]]})
    assert _deliver(database_url, clock=later + timedelta(days=1, seconds=2)) == 1
    assert [b["data"]["match_id"] for b in target.bodies()] == ["m0", "m1", "m2", "after"]
    lost = [d for d in _deliveries(hooks, hook["id"]) if d["status"] == "failed"]
    assert len(lost) == 1 and lost[0]["last_error"] == "HTTP 500"


def test_a_receiver_that_times_out_is_retried(
    hooks: TestClient, database_url: str, target: Receiver
) -> None:
    create_ladder(hooks, "a")
    hook = _register(hooks, target.url)
    post_match(hooks, "a", {"teams": [["x"], ["y"]]})
    target.status = None  # hangs
    assert _deliver(database_url, timeout=0.3) == 0
    (held,) = _deliveries(hooks, hook["id"])
    assert held["status"] == "retrying" and "Timeout" in held["last_error"]


def test_a_hanging_receiver_holds_back_only_its_own(
    quiet: None, monkeypatch: pytest.MonkeyPatch, database_url: str, admin_key: str
) -> None:
    """Through the app's own dispatcher: one receiver hangs, the other gets every event."""
    monkeypatch.setenv("RATINGS_WEBHOOK_POLL_S", "0.05")
    monkeypatch.setenv("RATINGS_WEBHOOK_TIMEOUT_S", "20")
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    from app.config import get_settings
    from app.main import create_app

    get_settings.cache_clear()
    with receiver() as stuck, receiver() as fine, TestClient(create_app()) as app:
        app.headers["Authorization"] = f"Bearer {admin_key}"
        stuck.status = None
        create_ladder(app, "a")
        _register(app, stuck.url)
        _register(app, fine.url)
        for n in range(10):
            post_match(app, "a", {"match_id": f"m{n}", "teams": [["x"], [f"y{n}"]]})
        deadline = datetime.now(UTC) + timedelta(seconds=30)
        while len(fine.received) < 10 and datetime.now(UTC) < deadline:
            time.sleep(0.05)
        assert [b["data"]["match_id"] for b in fine.bodies()] == [f"m{n}" for n in range(10)]
        assert stuck.received == []
        stuck.release.set()
    get_settings.cache_clear()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://x", "events": ["match.recorded"]}, "url"),
        ({"url": "http://", "events": ["match.recorded"]}, "url"),
        ({"url": "http://h/a b", "events": ["match.recorded"]}, "url"),
        ({"url": "http://h/", "events": []}, "events"),
        ({"url": "http://h/", "events": ["match.eaten"]}, "events"),
        ({"url": "http://h/", "events": ["match.recorded", "match.recorded"]}, "events"),
        ({"url": "http://h/", "events": ["match.recorded"], "ladders": []}, "ladders"),
        ({"url": "http://h/", "events": ["match.recorded"], "ladders": ["Bad Id"]}, "ladders"),
        ({"url": "http://h/", "events": ["match.recorded"], "secret": "mine"}, "secret"),
    ],
)
def test_a_bad_registration_names_its_field_and_changes_nothing(
    hooks: TestClient, database_url: str, body: dict[str, Any], field: str
) -> None:
    before = table_counts(database_url)
    assert_problem(hooks.post("/v1/webhooks", json=body), 422, field)
    assert table_counts(database_url) == before


def test_receivers_are_listed_without_secrets_and_deleted(
    hooks: TestClient, database_url: str, target: Receiver
) -> None:
    create_ladder(hooks, "a")
    hook = _register(hooks, target.url)
    listed = hooks.get("/v1/webhooks")
    assert listed.status_code == 200
    assert hook["secret"] not in listed.text
    assert listed.json()["webhooks"] == [{k: v for k, v in hook.items() if k != "secret"}]
    post_match(hooks, "a", {"teams": [["x"], ["y"]]})
    assert _deliver(database_url) == 1
    deleted = hooks.delete(f"/v1/webhooks/{hook['id']}")
    assert deleted.status_code == 200
    assert hooks.get("/v1/webhooks").json()["webhooks"] == []
    assert_problem(hooks.delete(f"/v1/webhooks/{hook['id']}"), 404, hook["id"])
    assert_problem(hooks.get(f"/v1/webhooks/{hook['id']}/deliveries"), 404, hook["id"])
    post_match(hooks, "a", {"teams": [["x"], ["y"]]})
    assert _deliver(database_url) == 0
    assert table_counts(database_url)["webhook_deliveries"] == 0
    writer = _key(database_url, "write")
    valid = {"url": target.url, "events": ["match.recorded"]}
    for method, path in (("GET", "/v1/webhooks"), ("POST", "/v1/webhooks")):
        assert_problem(hooks.request(method, path, headers=writer, json=valid), 403)


def test_old_deliveries_are_pruned_with_the_events_retention(
    hooks: TestClient, database_url: str, target: Receiver
) -> None:
    create_ladder(hooks, "a")
    hook = _register(hooks, target.url)
    post_match(hooks, "a", {"match_id": "old", "teams": [["x"], ["y"]]})
    assert _deliver(database_url) == 1
    target.status = 503
    post_match(hooks, "a", {"match_id": "held", "teams": [["x"], ["y"]]})
    _deliver(database_url)
    engine = get_engine(database_url)
    with engine.begin() as connection:
        connection.execute(
            update(WebhookDelivery).values(last_attempt_at=datetime.now(UTC) - timedelta(days=31))
        )
    transact = unit_of_work.transactor(session_factory(engine))
    rows = transact(lambda session: hook_repo.every_hook(session=session))
    assert webhooks.prune_deliveries(transact=transact, hooks=rows, now=datetime.now(UTC)) == 1
    # The one being retried stays: it holds the receiver's place in the ladder.
    assert [d["status"] for d in _deliveries(hooks, hook["id"])] == ["retrying"]
