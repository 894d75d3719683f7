"""The OpenAPI document describes every route of the contract, each body with examples."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from app.domain.documents import (
    events,
    fitting,
    keys,
    ladders,
    matches,
    matchmaking,
    players,
    predictions,
    shared,
    webhooks,
)

MODELS = [
    ladders.LadderCreate,
    ladders.LadderOut,
    ladders.LadderPage,
    matches.MatchCreate,
    matches.MatchResult,
    matches.MatchPage,
    matches.TeamResult,
    matches.PlayerResult,
    shared.RatingOut,
    players.LeaderboardEntry,
    players.LeaderboardPage,
    players.PlayerOut,
    players.PlayerSeed,
    players.HistoryEntry,
    players.HistoryPage,
    predictions.QualityRequest,
    predictions.QualityOut,
    matches.MatchBatch,
    matches.BatchResult,
    matches.VoidResult,
    ladders.LadderUpdate,
    ladders.LadderUpdated,
    ladders.LadderDeleted,
    players.ErasureResult,
    matchmaking.MatchmakingRequest,
    matchmaking.MatchmakingOut,
    fitting.FitRequest,
    fitting.FitOutcome,
    keys.KeyCreate,
    keys.KeyCreated,
    keys.KeyOut,
    keys.KeyList,
    events.EventOut,
    events.EventPage,
    webhooks.WebhookCreate,
    webhooks.WebhookCreated,
    webhooks.WebhookOut,
    webhooks.WebhookList,
    webhooks.DeliveryOut,
]
#: Bodies the command line reports rather than a route: their examples must validate too.
NOT_IN_DOCUMENT = {ladders.RebuildResult}


@pytest.mark.parametrize("model", [*MODELS, *NOT_IN_DOCUMENT], ids=lambda m: m.__name__)
def test_every_schema_has_examples_that_validate(model: type[BaseModel]) -> None:
    examples = model.model_json_schema().get("examples")
    assert examples, f"{model.__name__} has no examples"
    for example in examples:
        model.model_validate(example)


def test_the_document_lists_every_route(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    paths = document["paths"]
    expected = {
        "/v1/ladders": {"get", "post"},
        "/v1/ladders/{ladder}": {"get", "patch", "delete"},
        "/v1/ladders/{ladder}/matches": {"get", "post"},
        "/v1/ladders/{ladder}/matches/batch": {"post"},
        "/v1/ladders/{ladder}/matches/{match_id}": {"get", "delete"},
        "/v1/ladders/{ladder}/leaderboard": {"get"},
        "/v1/ladders/{ladder}/players/{player_id}": {"get", "put", "delete"},
        "/v1/ladders/{ladder}/players/{player_id}/history": {"get"},
        "/v1/ladders/{ladder}/quality": {"post"},
        "/v1/ladders/{ladder}/matchmaking": {"post"},
        "/v1/ladders/{ladder}/fit": {"post"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path
    components = document["components"]["schemas"]
    for model in MODELS:
        assert components[model.__name__].get("examples"), model.__name__


@pytest.mark.parametrize("model", ["RatingOut", "LeaderboardEntry", "PlayerOut"])
def test_the_volatility_is_a_declared_field(client: TestClient, model: str) -> None:
    document = client.get("/openapi.json").json()
    component = document["components"]["schemas"][model]
    volatility = component["properties"]["volatility"]
    assert {option.get("type") for option in volatility["anyOf"]} == {"number", "null"}
    assert "Glicko-2" in volatility["description"]
    # Optional: the match results of other ladders leave it out.
    assert "volatility" not in component.get("required", [])
