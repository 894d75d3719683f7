"""API keys: hashed storage, scopes, revocation at once, 401/403 problem documents."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.config import get_settings
from app.services import auth
from app.storage.engine import get_engine, session_factory
from tests.ops.conftest import assert_problem, bearer

MakeKey = Callable[[str, str], auth.NewKey]


class TestKeyFormat:
    def test_key_has_prefix_and_256_bit_secret(self) -> None:
        key = auth.generate_key()
        prefix = auth.key_prefix(key)
        assert key.startswith(prefix + "_")
        assert prefix.startswith("rk_") and len(prefix) == 11
        assert len(key) - len(prefix) - 1 == 43  # 32 random bytes, url-safe base64

    def test_keys_differ(self) -> None:
        assert len({auth.generate_key() for _ in range(100)}) == 100

    def test_hash_is_sha256_hex_of_whole_key(self) -> None:
        key = "rk_00000000_secret"
        assert auth.hash_key(key) == hashlib.sha256(key.encode()).hexdigest()


class TestStorage:
    def test_only_the_hash_is_stored(self, db_url: str, make_key: MakeKey) -> None:
        new = make_key("write", "game-server")
        with get_engine(db_url).connect() as connection:
            rows = connection.execute(text("SELECT * FROM api_keys")).mappings().all()
        assert len(rows) == 1
        row = rows[0]
        assert row["key_hash"] == hashlib.sha256(new.key.encode()).hexdigest()
        assert row["prefix"] == new.prefix
        secret = new.key[len(new.prefix) + 1 :]
        assert all(secret not in str(value) for value in row.values())

    def test_listing_never_shows_key_or_hash(self, make_key: MakeKey, db_url: str) -> None:
        new = make_key("read", "dashboard")
        session = session_factory(get_engine(db_url))()
        (info,) = auth.list_keys(session)
        session.close()
        assert (info.name, info.scope, info.prefix) == ("dashboard", "read", new.prefix)
        assert info.revoked_at is None
        assert not hasattr(info, "key") and not hasattr(info, "key_hash")

    def test_duplicate_active_name_refused(self, make_key: MakeKey) -> None:
        make_key("read", "dup")
        with pytest.raises(auth.Conflict):
            make_key("read", "dup")

    def test_unknown_scope_refused(self, make_key: MakeKey) -> None:
        with pytest.raises(auth.InvalidInput, match="scope"):
            make_key("root", "x")

    def test_first_admin_key_only_on_empty_table(self, db_url: str) -> None:
        session = session_factory(get_engine(db_url))()
        first = auth.ensure_first_admin_key(session)
        assert first is not None and first.scope == "admin" and first.name == "admin"
        assert auth.ensure_first_admin_key(session) is None
        auth.revoke_key(session, name_or_prefix="admin")
        # A revoked key still counts: the operator revoked it on purpose.
        assert auth.ensure_first_admin_key(session) is None
        session.close()

    def test_replicas_starting_together_make_one_admin_key(self, db_url: str) -> None:
        barrier = threading.Barrier(4)
        made: list[auth.NewKey | None] = []
        lock = threading.Lock()

        def start() -> None:
            session = session_factory(get_engine(db_url))()
            try:
                barrier.wait(timeout=10)
                new = auth.ensure_first_admin_key(session)
                session.commit()
            finally:
                session.close()
            with lock:
                made.append(new)

        threads = [threading.Thread(target=start) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(made) == 4
        assert sum(new is not None for new in made) == 1
        session = session_factory(get_engine(db_url))()
        assert len(auth.list_keys(session)) == 1
        session.close()


class TestScopes:
    @pytest.mark.parametrize(
        ("scope", "path", "status"),
        [
            ("read", "/probe/write", 403),
            ("read", "/probe/admin", 403),
            ("write", "/probe/write", 200),
            ("write", "/probe/admin", 403),
            ("admin", "/probe/write", 200),
            ("admin", "/probe/admin", 200),
        ],
    )
    def test_scope_order(
        self, client: TestClient, make_key: MakeKey, scope: str, path: str, status: int
    ) -> None:
        new = make_key(scope, f"{scope}-key")
        response = client.post(path, headers=bearer(new.key))
        assert response.status_code == status
        if status == 403:
            body = assert_problem(response, 403)
            assert "Authorization" in str(body["detail"])
            assert new.key not in response.text

    def test_missing_key_is_401_with_challenge(self, client: TestClient) -> None:
        response = client.post("/probe/write")
        body = assert_problem(response, 401)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "write" in str(body["detail"])

    @pytest.mark.parametrize(
        "header",
        ["Bearer rk_00000000_unknown", "Basic dXNlcjpwYXNz", "Bearer", "rk_00000000_x"],
    )
    def test_unknown_or_malformed_key_is_401(self, client: TestClient, header: str) -> None:
        response = client.post("/probe/admin", headers={"Authorization": header})
        assert_problem(response, 401)
        assert "www-authenticate" in response.headers

    def test_revoked_key_refused_at_once(
        self, client: TestClient, make_key: MakeKey, db_url: str
    ) -> None:
        new = make_key("write", "to-revoke")
        assert client.post("/probe/write", headers=bearer(new.key)).status_code == 200
        session = session_factory(get_engine(db_url))()
        auth.revoke_key(session, name_or_prefix=new.prefix)
        session.commit()
        session.close()
        response = client.post("/probe/write", headers=bearer(new.key))
        assert_problem(response, 401)

    def test_reads_open_by_default(self, client: TestClient) -> None:
        assert client.get("/probe/read").json() == {"scope": "read"}

    def test_reads_need_a_key_when_configured(
        self, client: TestClient, make_key: MakeKey, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RATINGS_REQUIRE_READ_KEY", "true")
        get_settings.cache_clear()
        assert_problem(client.get("/probe/read"), 401)
        new = make_key("read", "reader")
        assert client.get("/probe/read", headers=bearer(new.key)).status_code == 200

    def test_use_is_recorded(self, client: TestClient, make_key: MakeKey, db_url: str) -> None:
        new = make_key("write", "used")
        client.post("/probe/write", headers=bearer(new.key))
        session = session_factory(get_engine(db_url))()
        (info,) = auth.list_keys(session)
        session.close()
        assert info.last_used_at is not None and info.last_used_at >= info.created_at


class TestRevoke:
    def test_by_name_and_unknown(self, make_key: MakeKey, db_url: str) -> None:
        make_key("read", "a")
        session = session_factory(get_engine(db_url))()
        info = auth.revoke_key(session, name_or_prefix="a")
        assert info.revoked_at is not None
        with pytest.raises(auth.NotFound):
            auth.revoke_key(session, name_or_prefix="a")
        session.close()
