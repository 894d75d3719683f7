"""The compose files hold together: every setting they give the service is one of its
settings, every database, pooler or cache they name is a service of the same file, every
file they mount is in the project, and the proxy sends to the instances there are."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from app.config import Settings

ROOT = Path(__file__).resolve().parents[2]

COMPOSE_FILES = ["docker-compose.yml", "docker-compose.scale.yml"]


def _load(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _ratings_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose["services"].items()
        if service.get("build") == "."
    }


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_setting_is_the_services_and_every_host_a_service(name: str) -> None:
    compose = _load(name)
    services = set(compose["services"])
    instances = _ratings_services(compose)
    assert instances, "no service built from this project"
    fields = {field.upper() for field in Settings.model_fields}
    for service in instances.values():
        environment = service["environment"]
        for variable, value in environment.items():
            assert variable.startswith("RATINGS_"), variable
            assert variable.removeprefix("RATINGS_") in fields, variable
            if variable.endswith("_URL"):
                host = make_url(re.sub(r"\$\{[^}]*\}", "x", str(value))).host
                assert host in services, (variable, host)
        for dependency in service.get("depends_on", {}):
            assert dependency in services, dependency


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_mounted_file_is_in_the_project(name: str) -> None:
    compose = _load(name)
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).is_file(), source


def test_the_proxy_sends_to_both_instances_and_is_the_trusted_one() -> None:
    compose = _load("docker-compose.scale.yml")
    instances = _ratings_services(compose)
    assert len(instances) == 2
    config = (ROOT / "deploy" / "scale" / "nginx.conf").read_text(encoding="utf-8")
    upstreams = set(re.findall(r"server (\w+):8000", config))
    assert upstreams == set(instances)
    proxy_address = compose["services"]["proxy"]["networks"]["backend"]["ipv4_address"]
    for service in instances.values():
        assert service["environment"]["RATINGS_TRUSTED_PROXIES"] == proxy_address
        assert service["environment"]["RATINGS_DATABASE_POOLER"] == "transaction"
        assert make_url(service["environment"]["RATINGS_DATABASE_URL"]).host == "pgbouncer"
        assert make_url(service["environment"]["RATINGS_READ_DATABASE_URL"]).host == "standby"
