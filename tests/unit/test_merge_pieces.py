"""The pieces of the operation merge, one by one (the whole merge: test_merge_operations.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from parallax.logic.merge_operations.clusters import Cluster, Clusters, Rep
from parallax.logic.merge_operations.matching import Bars, Matcher, Similarities
from parallax.logic.merge_operations.operations_out import (
    ArchiveRule,
    archive_untouched,
    cluster_operations,
)
from parallax.logic.merge_operations.wordings import Wording, canonical_key, collect_wordings
from parallax.state.playbook import Operation, PlaybookItem, item_id_for


def add(text, about=(), provenance=("r1",), count=1, section="general"):
    return Operation(
        op="add",
        text=text,
        about=list(about),
        provenance=list(provenance),
        count=count,
        section=section,
    )


def vectors(table: dict[str, list[float]]):
    """An embedder from a table of normalised text -> vector (rows normalised to unit length)."""

    def embed(texts):
        rows = np.array([table[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    return embed


def item(text, about=(), status="active", helpful=0, harmful=0, provenance=("old",)):
    return PlaybookItem(
        id=item_id_for(text, "general"),
        text=text,
        about=list(about),
        status=status,
        helpful=helpful,
        harmful=harmful,
        provenance=list(provenance),
    )


def test_collect_wordings_unites_exact_duplicates_and_registers_updates_of_known_items():
    known = item("Old text.")
    ops = [
        add("Net margin = NI / revenue.", ["net margin"], ["r1"], count=2),
        add("net  margin = ni / revenue.", ["Margin"], ["r2"]),
        add("   "),
        Operation(op="update", item_id=known.id, text="New text."),
        Operation(op="update", item_id="pb-unknown", text="Ignored text."),
    ]
    report = Counter()
    wordings = collect_wordings(ops, {known.id: known}, report)
    assert sorted(wordings) == ["net margin = ni / revenue.", "new text."]
    w = wordings["net margin = ni / revenue."]
    assert (w.count, w.provenance, w.about, w.text) == (
        3,
        {"r1", "r2"},
        frozenset({"net margin", "margin"}),
        "Net margin = NI / revenue.",
    )
    assert wordings["new text."].count == 0 and report["adds_in"] == 2


def test_canonical_order_prefers_named_then_fewer_names_then_shorter():
    keys = sorted(
        [
            canonical_key("a general lesson", "s", []),
            canonical_key("two names here", "s", ["a", "b"]),
            canonical_key("a long lesson with one name", "s", ["a"]),
            canonical_key("short one", "s", ["a"]),
        ]
    )
    assert [k[3] for k in keys] == [
        "short one",
        "a long lesson with one name",
        "two names here",
        "a general lesson",
    ]


@pytest.mark.parametrize(
    "a, b, bar",
    [
        ({"gross margin"}, {"gross margin"}, 0.5),
        (set(), set(), 0.5),
        ({"gross margin", "revenue"}, {"gross margin"}, 0.8),
        ({"gross margin"}, set(), 0.8),
        ({"gross margin"}, {"operating margin"}, 0.95),
    ],
)
def test_the_match_bar_depends_on_the_names(a, b, bar):
    assert Bars().bar(frozenset(a), frozenset(b)) == bar


def test_similarities_are_symmetric_and_cover_items_on_demand():
    embed = vectors({"x": [1, 0], "y": [1, 1], "item": [0, 1]})
    sim = Similarities(["x", "y"], {"item"}, embed)
    assert sim("x", "y") == pytest.approx(sim("y", "x")) == pytest.approx(2**-0.5)
    assert sim("item", "item") == pytest.approx(1.0) and sim("x", "item") == pytest.approx(0.0)


def test_the_judge_decides_only_the_ambiguous_band_once_per_pair():
    asked = []
    scores = {("a", "b"): 0.6, ("a", "c"): 0.3, ("a", "d"): 0.9}
    matcher = Matcher(
        lambda x, y: scores[(x, y)], Bars(), judge=lambda x, y: asked.append((x, y)) or True
    )
    same = frozenset({"n"})
    assert matcher.matches("a", same, "b", same) and matcher.matches("a", same, "b", same)
    assert not matcher.matches("a", same, "c", same) and matcher.matches("a", same, "d", same)
    assert asked == [("a", "b")]
    assert Matcher(lambda x, y: 0.0, Bars()).matches(
        "same text", frozenset(), "same text", frozenset({"x"})
    )


def test_a_wording_matching_two_items_bridges_them_into_one_cluster():
    one = item("Gross margin is gross profit over revenue.", ["gross margin"])
    two = item("Gross margin: GP / revenue.", ["gross margin"])
    w = Wording(
        "gross margin = gp / sales.",
        "Gross margin = GP / sales.",
        "general",
        frozenset({"gross margin"}),
        count=1,
    )
    table = {
        "gross margin is gross profit over revenue.": [1, 0],
        "gross margin: gp / revenue.": [0, 1],
        "gross margin = gp / sales.": [1, 1],
    }
    sim = Similarities([w.norm], set(table) - {w.norm}, vectors(table))
    clusters = Clusters([one, two], Matcher(sim, Bars()))
    clusters.place(w)
    alive = [c for c in clusters.all if c.alive]
    assert (
        len(alive) == 1
        and {i.id for i in alive[0].items} == {one.id, two.id}
        and alive[0].wordings == [w]
    )


def test_an_archived_lesson_is_reinforced_not_added_again():
    gone = item("Never divide by zero.", status="archived", harmful=5)
    w = Wording("never divide by zero.", "Never divide by zero.", "general", frozenset(), count=1)
    clusters = Clusters(
        [gone], Matcher(Similarities([w.norm], {w.norm}, vectors({w.norm: [1.0]})), Bars())
    )
    clusters.place(w)
    assert [c.items for c in clusters.all if c.alive] == [[gone]]


def test_tags_and_archive_requests_land_on_their_cluster_and_unknown_targets_are_dropped():
    kept = item("Keep units.")
    clusters = Clusters([kept], Matcher(lambda a, b: 0.0, Bars()))
    report = Counter()
    for op in (
        Operation(op="tag_helpful", item_id=kept.id, count=2, provenance=["r5"]),
        Operation(op="archive", item_id=kept.id),
        Operation(op="tag_harmful", item_id="pb-nope"),
    ):
        clusters.apply(op, {}, archive_votes=3, report=report)
    c = clusters.cluster_of(kept)
    assert (c.helpful, c.harmful, c.provenance) == (2, 3, {"r5"})
    assert (report["tags"], report["archive_requests"], report["dropped_unknown_target"]) == (
        1,
        1,
        1,
    )


def test_a_new_cluster_becomes_one_add_counting_every_proposal():
    w = Wording(
        "ratio = a / b.",
        "Ratio = a / b.",
        "general",
        frozenset({"ratio"}),
        count=3,
        provenance={"r1", "r2"},
    )
    report = Counter()
    new_id, ops = cluster_operations(Cluster(Rep.of(w), wordings=[w]), ArchiveRule(), report)
    assert new_id == item_id_for("Ratio = a / b.", "general") and report["items_added"] == 1
    assert [(o.op, o.count, o.provenance, o.about) for o in ops] == [
        ("add", 3, ["r1", "r2"], ["ratio"])
    ]


def test_a_smaller_wording_supersedes_an_item_and_carries_its_counts():
    old = item(
        "The current ratio is current assets divided by current liabilities.",
        ["current ratio"],
        helpful=2,
        harmful=1,
    )
    w = Wording(
        "current ratio = ca / cl.",
        "Current ratio = CA / CL.",
        "general",
        frozenset({"current ratio"}),
        count=1,
    )
    c = Cluster(Rep.of(old), [old])
    c.wordings.append(w)
    c.rep = min(c.rep, Rep.of(w), key=lambda r: r.key)
    report = Counter()
    new_id, ops = cluster_operations(c, ArchiveRule(), report)
    assert [(o.op, o.item_id) for o in ops] == [
        ("archive", old.id),
        ("add", new_id),
        ("tag_harmful", new_id),
    ]
    assert (
        ops[1].count == 2 + 1 + 1 and ops[2].count == 1
    )  # old helpful + this proposal, as apply_operations counts adds
    assert report["superseded"] == 1 and report["items_reinforced"] == 1


def test_untouched_items_are_archived_when_their_counts_meet_the_rule():
    bad, fine = item("Bad lesson.", harmful=4), item("Fine lesson.", helpful=3, harmful=4)
    report = Counter()
    blocks = archive_untouched(
        [bad, fine], set(), {bad.id: True, fine.id: True}, ArchiveRule(), report
    )
    assert [(i, [o.op for o in ops]) for i, ops in blocks] == [(bad.id, ["archive"])] and report[
        "archived"
    ] == 1
