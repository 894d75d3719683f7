"""Reading match files: formats, time order, outcomes, bad lines, repeated players."""

from __future__ import annotations

import math

import pytest

from app.evaluation.data import DataError, empirical_draw_probability, read_matches
from tests.evaluation.conftest import WriteMatches

BODIES = [
    {"match_id": "b", "played_at": "2024-01-02", "teams": [["x"], ["y"]], "ranks": [2, 1]},
    {"match_id": "a", "played_at": "2024-01-01T12:00:00", "teams": [["y"], ["z"]]},
    {
        "match_id": "c",
        "played_at": "2024-01-02T00:00:00Z",
        "teams": [["x", "z"], ["y"]],
        "scores": [3, 3],
        "weights": [[1.0, 0.5], [1.0]],
        "advantage": [1, 0],
    },
]


def test_plain_and_gzip_read_alike_in_time_order(write_matches: WriteMatches) -> None:
    plain = read_matches(write_matches(BODIES))
    gz = read_matches(write_matches(BODIES, name="m.jsonl.gz"))
    assert [m.match_id for m in plain.matches] == ["a", "b", "c"]
    assert [m.match_id for m in gz.matches] == ["a", "b", "c"]
    assert plain.matches == gz.matches
    # Players are numbered in order of first appearance in the file.
    assert plain.players == ["x", "y", "z"]
    a, b, c = plain.matches
    assert a.teams == ((1,), (2,)) and a.ranks == (0.0, 1.0)  # winner first
    assert b.ranks == (2.0, 1.0) and b.line == 1
    assert c.ranks == (-3.0, -3.0)  # scores: higher is better, equal is a draw
    assert c.weights == ((1.0, 0.5), (1.0,))
    assert c.scores == (3.0, 3.0) and a.scores is None and b.scores is None
    assert c.advantage == (1.0, 0.0) and a.advantage is None
    # 2024-01-02 at midnight UTC, with or without the zone; the date alone is midnight.
    assert b.day == c.day == 19724.0
    assert a.day == 19723.5
    assert not plain.skipped


@pytest.mark.parametrize(
    ("line", "message"),
    # Each line refused as the API refuses the match, with its words.
    [
        ("{not json", "body: not valid JSON"),
        ("[1, 2]", "body: Input should be an object"),
        ('{"teams": [["a"]]}', "teams: List should have at least 2 items"),
        ('{"teams": [["a"], []]}', "teams.1: List should have at least 1 item"),
        ('{"teams": [["a"], [true]]}', "teams.1.0: Input should be a valid string"),
        ('{"teams": [["a"], ["b"]], "ranks": [1]}', "ranks: expected 2 values"),
        ('{"teams": [["a"], ["b"]], "ranks": [1, 2], "scores": [1, 2]}', "not both"),
        ('{"teams": [["a"], ["b"]], "scores": [1, NaN]}', "scores.1: Input should be a finite"),
        ('{"teams": [["a"], ["b"]], "weights": [[1.5], [1]]}', "weights.0.0: Input should be"),
        ('{"teams": [["a"], ["b"]], "played_at": "yesterday"}', "played_at: not an RFC 3339"),
        ('{"teams": [["a"], ["b"]], "advantage": [1]}', "advantage: expected 2 values"),
        ('{"teams": [["a"], ["b"]], "advantage": [2, 0]}', "advantage.0: Input should be"),
        ('{"teams": [["a"], ["b"]], "colour": "red"}', "colour: Extra inputs are not permitted"),
        ('{"teams": [["a"], ["' + "x" * 129 + '"]]}', "teams.1.0: String should have at most"),
    ],
)
def test_a_bad_line_is_named(write_matches: WriteMatches, line: str, message: str) -> None:
    """A line the API would refuse stops the reading, named with the API's reason (the
    reader of ``ratings import``, ``evaluate`` and ``fit`` alike)."""
    good = '{"teams": [["a"], ["b"]]}'
    path = write_matches([good, "", line, good])
    with pytest.raises(DataError) as info:
        read_matches(path)
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: ")
    assert message in str(info.value)


def test_a_missing_file_is_an_error() -> None:
    with pytest.raises(DataError, match="cannot open"):
        read_matches("/nonexistent/matches.jsonl")


def test_a_corrupt_gzip_names_the_file(write_matches: WriteMatches) -> None:
    path = write_matches(['{"teams": [["a"], ["b"]]}'])
    gz = path.with_name("bad.jsonl.gz")
    gz.write_bytes(b"this is not gzip")
    with pytest.raises(DataError, match=r"bad\.jsonl\.gz"):
        read_matches(gz)


def test_a_player_twice_in_one_match_is_skipped_and_counted(
    write_matches: WriteMatches,
) -> None:
    f = read_matches(
        write_matches(
            [
                {"teams": [["a"], ["b"], ["a"]], "ranks": [1, 2, 3]},
                {"teams": [["a"], ["b"]]},
                {"teams": [["c", "c"], ["b"]]},
            ]
        )
    )
    assert f.skipped == 2 and f.skipped_lines == [1, 3]
    assert len(f.matches) == 1 and f.players == ["a", "b"]


def test_empirical_draw_probability_counts_neighbours_in_the_order(
    write_matches: WriteMatches,
) -> None:
    f = read_matches(
        write_matches(
            [
                {"teams": [["a"], ["b"]], "ranks": [1, 1]},  # 1 compared pair, drawn
                {"teams": [["a"], ["b"]], "ranks": [1, 2]},  # 1, not drawn
                # sorted ranks 1, 2, 2, 2: three neighbouring pairs, two drawn
                {"teams": [["a"], ["b"], ["c"], ["d"]], "ranks": [2, 1, 2, 2]},
            ]
        )
    )
    assert empirical_draw_probability(f.matches) == pytest.approx(3 / 5)
    assert empirical_draw_probability([]) == 0.0
    assert math.isnan(f.matches[0].day)
