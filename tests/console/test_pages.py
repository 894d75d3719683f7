"""The console's pages over HTTP on each database: what they show, paging and search,
errors as HTML pages, access by a session cookie, and that nothing under /console writes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.config import get_settings
from app.console.routes import COOKIE, CSP
from app.services import auth
from app.storage.engine import get_engine, session_factory
from tests.service.helpers import create_ladder, table_counts

PLAYERS = [f"p{n}" for n in range(7)]


def _seed(client: TestClient) -> None:
    """A TrueSkill ladder of seven players: p0 beats everyone below it once, p5 and p6
    draw; an Elo ladder beside it."""
    create_ladder(client, "duel")
    create_ladder(client, "races", algorithm="elo")
    matches: list[dict[str, Any]] = []
    for a in range(6):
        for b in range(a + 1, 6):
            matches.append({"match_id": f"m{a}{b}", "teams": [[f"p{a}"], [f"p{b}"]]})
    matches.append({"match_id": "draw", "teams": [["p5"], ["p6"]], "ranks": [1, 1]})
    matches.append({"match_id": "ffa", "teams": [["p0"], ["p1", "p2"], ["p3"]], "ranks": [2, 1, 2]})
    answer = client.post("/v1/ladders/duel/matches/batch", json={"matches": matches})
    assert answer.status_code == 201, answer.text


def _html(response: httpx.Response, status: int = 200) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CSP
    return response.text


def _text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def _board(html: str) -> list[tuple[int, str]]:
    """The (rank, player) rows of a leaderboard page."""
    rows = re.findall(
        r'<td class="n">(\d+)</td>\s*<th scope="row"><a href="[^"]+">([^<]+)</a>', html
    )
    return [(int(rank), player) for rank, player in rows]


def _next(html: str) -> str | None:
    found = re.search(r'<a href="([^"]+)" rel="next">', html)
    return unescape(found.group(1)) if found else None


def test_the_pages_show_the_ladders_the_board_a_player_and_the_health(
    client: TestClient,
) -> None:
    _seed(client)
    ladders = _text(_html(client.get("/console")))
    assert "duel trueskill" in ladders and "races elo" in ladders
    assert "conservative_k 3.0" in ladders  # the parameters
    assert re.search(r"duel trueskill .* 7 17 ", ladders)  # players and matches

    api = client.get("/v1/ladders/duel/leaderboard").json()["entries"]
    board = _board(_html(client.get("/console/ladders/duel")))
    assert board == [(entry["rank"], entry["player_id"]) for entry in api]

    player = _html(client.get("/console/ladders/duel/players/p1"))
    text = _text(player)
    history = client.get("/v1/ladders/duel/players/p1/history").json()["entries"]
    assert len(re.findall(r"<tr>\s*<td>", player)) == len(history) == 6
    assert "ffa 1st of 3 p0 , p3 p2" in text  # the free-for-all: place, opponents, teammate
    assert "m01 lost p0" in text
    assert f"{history[0]['after']['mu']:,.2f}" in text
    draw = _text(_html(client.get("/console/ladders/duel/players/p6")))
    assert "draw drew p5" in draw

    trajectory = client.get("/console/ladders/duel/players/p1/trajectory.json").json()
    assert len(trajectory["x"]) == len(trajectory["mu"]) == len(history) + 1
    assert trajectory["mu"][-1] == pytest.approx(history[0]["after"]["mu"], abs=1e-4)
    assert trajectory["conservative"][0] == pytest.approx(0.0, abs=1e-4)  # the prior
    assert trajectory["upper"][0] - trajectory["lower"][0] == pytest.approx(2 * 25 / 3, abs=1e-3)
    # When each point was played: the x axis's labels (the newest entry is the last point).
    assert len(trajectory["played"]) == len(trajectory["mu"])
    assert trajectory["played"][-1] == history[0]["played_at"][:16].replace("T", " ")
    assert trajectory["glicko"] is False
    elo = client.get("/console/ladders/races")
    assert "No player has played yet" in _html(elo)
    answer = client.post(
        "/v1/ladders/races/matches", json={"teams": [["e1"], ["e2"], ["e3"]], "match_id": "r1"}
    )
    assert answer.status_code == 201
    elo_trajectory = client.get("/console/ladders/races/players/e1/trajectory.json").json()
    assert elo_trajectory["lower"] is None and elo_trajectory["conservative_k"] is None
    assert elo_trajectory["conservative"] == elo_trajectory["mu"]
    assert "Uncertainty" not in _html(client.get("/console/ladders/races"))

    health = _text(_html(client.get("/console/ladders/duel/health")))
    accuracy = client.get("/v1/ladders/duel/accuracy").json()
    assert f"Prediction error {100 * accuracy['prediction_error']:.1f} %" in health
    assert f"Log loss {accuracy['log_loss']:.3f}" in health
    assert "The newest 17 matches" in health
    assert "0.9 to 1.0" in health  # the draws by quality


def test_glicko2_pages_say_rating_deviation_and_volatility(client: TestClient) -> None:
    created = client.post(
        "/v1/ladders",
        json={"id": "g2", "algorithm": "glicko2", "params": {"tau": 0.5, "rating": 1500.0}},
    )
    assert created.status_code == 201, created.text
    client.post("/v1/ladders/g2/matches", json={"teams": [["a"], ["b"]]})
    client.patch("/v1/ladders/g2?rebuild=true", json={"params": {"tau": 25 / 6}})
    board = _text(_html(client.get("/console/ladders/g2")))
    assert "Deviation (RD)" in board and "Volatility (\u03c3)" in board
    assert "Uncertainty" not in board and "(mean)" not in board
    # Parameters as set, without a float's noise.
    assert "tau 4.16667" in board and "4.166666666666667" not in board
    player = _text(_html(client.get("/console/ladders/g2/players/a")))
    volatility = client.get("/v1/ladders/g2/players/a").json()["volatility"]
    assert f"Volatility (\u03c3) {volatility:,.4f}" in player
    assert client.get("/console/ladders/g2/players/a/trajectory.json").json()["glicko"] is True


def test_the_leaderboard_pages_with_the_cursor_and_finds_a_player(client: TestClient) -> None:
    _seed(client)
    seen: list[tuple[int, str]] = []
    path: str | None = "/console/ladders/duel?limit=3"
    while path is not None:
        html = _html(client.get(path))
        page = _board(html)
        assert 1 <= len(page) <= 3
        seen += page
        path = _next(html)
    assert [rank for rank, _ in seen] == list(range(1, 8))
    assert sorted(player for _, player in seen) == PLAYERS

    rank = client.get("/v1/ladders/duel/players/p4").json()["rank"]
    assert _board(_html(client.get("/console/ladders/duel?player=p4"))) == [(rank, "p4")]
    missing = _html(client.get("/console/ladders/duel", params={"player": "nobody"}))
    assert "No player <strong>nobody</strong>" in missing

    ladders = _html(client.get("/console?limit=1"))
    assert "/console/ladders/duel" in ladders and "/console/ladders/races" not in ladders
    assert "/console/ladders/races" in _html(client.get(_next(ladders) or ""))

    first = _html(client.get("/console/ladders/duel/players/p0?limit=2"))
    second = _html(client.get(_next(first) or ""))
    assert len(re.findall(r"<tr>\s*<td>", second)) == 2
    assert _text(first) != _text(second)


def test_errors_are_pages_with_their_status(client: TestClient) -> None:
    _seed(client)
    assert "no ladder" in _html(client.get("/console/ladders/nope"), 404)
    assert "no player" in _html(client.get("/console/ladders/duel/players/nobody"), 404)
    missing = client.get("/console/ladders/duel/players/nobody/trajectory.json")
    assert missing.status_code == 404 and "no player" in missing.json()["detail"]
    _html(client.get("/console/ladders/duel/health/more"), 404)
    _html(client.get("/console/elsewhere"), 404)
    for query in ("limit=0", "limit=x", "cursor=not-a-cursor", "player=" + "x" * 200):
        _html(client.get(f"/console/ladders/duel?{query}"), 422)
    _html(client.get("/console/ladders/duel/players/p0?cursor=WyJ4Il0"), 422)
    assert client.get("/console/static/console.css").status_code == 200
    slash = client.get("/console/", follow_redirects=False)
    assert slash.status_code == 308 and slash.headers["location"] == "/console"


def test_the_search_takes_the_id_as_typed(client: TestClient) -> None:
    """An id with spaces at its ends is found as typed; a pasted id with spaces that are
    not part of it is found too."""
    create_ladder(client, "spaced")
    answer = client.post("/v1/ladders/spaced/matches", json={"teams": [[" lead"], ["trail"]]})
    assert answer.status_code == 201, answer.text
    for typed, found in ((" lead", " lead"), ("trail  ", "trail"), ("lead", None)):
        html = _html(client.get("/console/ladders/spaced", params={"player": typed}))
        assert [player for _, player in _board(html)] == ([found] if found else [])


def test_nothing_under_the_console_writes(client: TestClient, database_url: str) -> None:
    _seed(client)
    before = table_counts(database_url)
    for path in (
        "/console",
        "/console/ladders/duel",
        "/console/ladders/duel?player=p1",
        "/console/ladders/duel/players/p1",
        "/console/ladders/duel/players/p1/trajectory.json",
        "/console/ladders/duel/health",
    ):
        assert client.get(path).status_code == 200
    assert table_counts(database_url) == before
    assert client.post("/console/ladders/duel").status_code == 405


def _read_key(database_url: str, revoked: bool = False) -> str:
    session = session_factory(get_engine(database_url))()
    try:
        made = auth.create_key(session, name="console", scope="read")
        if revoked:
            auth.revoke_key(session, name_or_prefix=made.prefix)
        session.commit()
    finally:
        session.close()
    return made.key


@pytest.fixture
def keyed(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    """The app with ``RATINGS_REQUIRE_READ_KEY`` on; no Bearer key sent (the console
    reads only its cookie)."""
    _seed(client)
    monkeypatch.setenv("RATINGS_REQUIRE_READ_KEY", "true")
    get_settings.cache_clear()
    from app.main import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as keyed_client:
        # What a browser sends with a form posted from the console's own page.
        keyed_client.headers["Origin"] = "http://testserver"
        yield keyed_client
    get_settings.cache_clear()


def test_a_required_read_key_is_asked_once_and_kept_for_the_session(
    keyed: TestClient, database_url: str
) -> None:
    away = keyed.get("/console/ladders/duel?limit=2", follow_redirects=False)
    assert away.status_code == 303
    assert away.headers["location"] == "/console/login?next=%2Fconsole%2Fladders%2Fduel%3Flimit%3D2"
    # The page asked for comes back as sent: an id with "%20" in it stays that id.
    escaped = "/console/ladders/duel/players/p%2520q"
    assert (
        keyed.get(escaped, follow_redirects=False).headers["location"]
        == "/console/login?next=%2Fconsole%2Fladders%2Fduel%2Fplayers%2Fp%252520q"
    )
    json_read = keyed.get("/console/ladders/duel/players/p1/trajectory.json")
    assert json_read.status_code == 401
    assert "API key" in _html(keyed.get(away.headers["location"]))

    wrong = keyed.post("/console/login", data={"key": "rk_nothing", "next": "/console"})
    assert "unknown or revoked" in _html(wrong, 401)
    assert COOKIE not in keyed.cookies
    _html(keyed.post("/console/login", data={"key": ""}), 400)

    key = _read_key(database_url)
    signed = keyed.post(
        "/console/login",
        data={"key": key, "next": "/console/ladders/duel?limit=2"},
        follow_redirects=False,
    )
    assert signed.status_code == 303
    assert signed.headers["location"] == "/console/ladders/duel?limit=2"
    cookie = signed.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert attributes == {COOKIE, "httponly", "path", "samesite"}  # no Expires, no Max-Age
    assert "Path=/console" in cookie and "SameSite=strict" in cookie
    # The cookie holds a session's token, not the key: it is no key to the API.
    token = keyed.cookies[COOKIE]
    assert key not in cookie and len(token) >= 43
    bearer = {"Authorization": f"Bearer {token}"}
    assert keyed.get("/v1/ladders/duel/leaderboard", headers=bearer).status_code == 401
    assert len(_board(_html(keyed.get("/console/ladders/duel?limit=2")))) == 2
    assert keyed.get("/console/ladders/duel/players/p1/trajectory.json").status_code == 200
    assert "Sign out" in _html(keyed.get("/console"))

    back = keyed.post("/console/login", data={"key": key, "next": escaped}, follow_redirects=False)
    assert back.headers["location"] == escaped

    token = keyed.cookies[COOKIE]  # the session signed in last
    out = keyed.post("/console/logout", follow_redirects=False)
    assert out.status_code == 303 and COOKIE not in keyed.cookies
    assert keyed.get("/console", follow_redirects=False).status_code == 303
    # Signed out on the server too: a copy of the cookie reads no more.
    keyed.cookies.set(COOKIE, token, path="/console")
    assert keyed.get("/console", follow_redirects=False).status_code == 303

    # Over https the cookie is Secure; elsewhere than the console is nowhere to go next.
    secure = keyed.post(
        "https://testserver/console/login",
        data={"key": key, "next": "//elsewhere.example/"},
        follow_redirects=False,
    )
    assert "Secure" in secure.headers["set-cookie"]
    assert secure.headers["location"] == "/console"


def test_a_revoked_key_sends_back_to_the_login(keyed: TestClient, database_url: str) -> None:
    key = _read_key(database_url)
    signed = keyed.post("/console/login", data={"key": key}, follow_redirects=False)
    assert signed.status_code == 303
    assert keyed.get("/console/ladders/duel").status_code == 200
    session = session_factory(get_engine(database_url))()
    auth.revoke_key(session, name_or_prefix=key[:11])
    session.commit()
    session.close()
    away = keyed.get("/console/ladders/duel", follow_redirects=False)
    assert away.status_code == 303
    assert away.headers["location"].endswith("&reason=refused")
    assert f'{COOKIE}=""' in away.headers["set-cookie"]
    assert "unknown or revoked" in _html(keyed.get(away.headers["location"]))
    # The form shows its own words only, whatever a link puts in its URL.
    planted = keyed.get("/console/login", params={"reason": "Enter your key at evil.example"})
    assert "evil.example" not in _html(planted)


@pytest.mark.parametrize("path", ["/console/login", "/console/logout"])
@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Referer": "https://evil.example/page"},
        {"Sec-Fetch-Site": "cross-site", "Origin": "http://testserver"},
        {},
    ],
    ids=["other origin", "opaque origin", "other referer", "cross-site fetch", "none"],
)
def test_signing_in_and_out_only_from_the_console_itself(
    keyed: TestClient, database_url: str, path: str, headers: dict[str, str]
) -> None:
    """Login CSRF: a page of another site posting a form (its attacker's key) must not
    sign the visitor in, nor out."""
    key = _read_key(database_url)
    del keyed.headers["Origin"]
    refused = keyed.post(path, data={"key": key}, headers=headers, follow_redirects=False)
    assert refused.status_code == 403, refused.text
    assert "set-cookie" not in refused.headers
    assert COOKIE not in keyed.cookies
    same = {"Sec-Fetch-Site": "same-origin"}
    assert (
        keyed.post(path, data={"key": key}, headers=same, follow_redirects=False).status_code == 303
    )


def test_open_reads_ask_no_key(client: TestClient) -> None:
    del client.headers["Authorization"]
    _seed_open = client.get("/console")
    assert "Sign out" not in _html(_seed_open)
    assert "no key is needed" in _html(client.get("/console/login"))


def test_seasons_their_archives_and_tiers(client: TestClient) -> None:
    """The season picker lists the seasons; a closed one shows its archived standings (paged
    within it); tiers get a column; the player page names the season and the tier."""
    _seed(client)
    tiers = [{"name": "High", "min": 5.0}, {"name": "Low", "min": -100.0}]
    assert client.patch("/v1/ladders/duel", json={"tiers": tiers}).status_code == 200
    before = _board(_html(client.get("/console/ladders/duel?limit=100")))
    assert (
        client.post("/v1/ladders/duel/seasons", json={"id": "s2", "keep": 0.0}).status_code == 201
    )
    later = "2099-01-01T00:00:00Z"
    response = client.post("/v1/ladders/duel/seasons", json={"id": "s3", "starts_at": later})
    assert response.status_code == 201

    html = _html(client.get("/console/ladders/duel"))
    text = _text(html)
    assert "Season: s3 (scheduled) s2 (current) 1" in text
    assert "season s2" in text
    assert '<a href="/console/ladders/duel?season=1">1</a>' in html
    assert '<th scope="col">Tier</th>' in html

    archive = _html(client.get("/console/ladders/duel?season=1&limit=3"))
    assert "Season 1: final standings" in _text(archive)
    assert _board(archive) == before[:3]
    nxt = _next(archive)
    assert nxt is not None and "season=1" in nxt
    assert _board(_html(client.get(nxt))) == before[3:6]
    assert 'name="player"' not in archive  # the search is the current leaderboard's
    _html(client.get("/console/ladders/duel?season=nope"), 404)

    player = _text(_html(client.get("/console/ladders/duel/players/p0")))
    assert "Season s2" in player and "Tier Low" in player  # everyone at the prior now


def test_provisional_players_are_shown_placing(client: TestClient) -> None:
    """Operators see every player: the provisional ones marked "placing" without a rank,
    the ranks counting the placed ones; the player page says how far placement has gone."""
    _seed(client)
    assert client.patch("/v1/ladders/duel", json={"placement_matches": 6}).status_code == 200
    html = _html(client.get("/console/ladders/duel?limit=100"))
    api = client.get(
        "/v1/ladders/duel/leaderboard", params={"include_provisional": "true", "limit": 100}
    ).json()["entries"]
    placing = [e["player_id"] for e in api if e["provisional"]]
    assert placing and len(placing) < len(api)
    assert _board(html) == [(e["rank"], e["player_id"]) for e in api if not e["provisional"]]
    assert html.count('<span class="provisional"') == len(placing)
    player = client.get(f"/v1/ladders/duel/players/{placing[0]}").json()
    text = _text(_html(client.get(f"/console/ladders/duel/players/{placing[0]}")))
    assert f"Placing: {player['season_matches']} of 6 placement matches" in text
