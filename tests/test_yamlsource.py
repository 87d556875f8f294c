"""The YAML reader keeps lines and text, and refuses what PyYAML hides."""

from __future__ import annotations

from pathlib import Path

from tuisched.domain.config.yamlsource import Map, Scalar, Seq, read_yaml

FILE = Path("/etc/tuisched.yaml")


def test_scalars_keep_their_text_line_and_quoting() -> None:
    root, problems = read_yaml(FILE, "a: 12:30\nb: 'on'\nc:\n  - on\n  - 0755\n")
    assert problems == []
    assert isinstance(root, Map)
    assert root.entries["a"].value == Scalar(text="12:30", line=1, plain=True)
    assert root.entries["b"].value == Scalar(text="on", line=2, plain=False)
    items = root.entries["c"].value
    assert isinstance(items, Seq)
    assert [item.text for item in items.items if isinstance(item, Scalar)] == ["on", "0755"]
    assert root.entries["c"].key_line == 3


def test_on_as_a_key_stays_the_word_on() -> None:
    root, _ = read_yaml(FILE, "after: {job: a, on: failure}\n")
    assert isinstance(root, Map)
    after = root.entries["after"].value
    assert isinstance(after, Map)
    assert list(after.entries) == ["job", "on"]


def test_duplicate_keys_are_problems_at_the_second_key() -> None:
    _, problems = read_yaml(FILE, "a: 1\nb:\n  x: 1\n  x: 2\na: 3\n")
    assert [(p.line, p.message.split(";")[0]) for p in problems] == [
        (4, "duplicate key 'x' (first at line 3)"),
        (5, "duplicate key 'a' (first at line 1)"),
    ]


def test_foreign_tags_are_refused_and_nothing_is_constructed() -> None:
    _, problems = read_yaml(FILE, "a: !!python/object/apply:os.system ['false']\nb: !!str 5\n")
    assert [(p.line, "YAML tag" in p.message) for p in problems] == [(1, True)]


def test_explicit_str_tag_is_not_plain() -> None:
    root, _ = read_yaml(FILE, "b: !!str 5\n")
    assert isinstance(root, Map)
    assert root.entries["b"].value == Scalar(text="5", line=1, plain=False)


def test_merge_keys_fill_in_without_overriding() -> None:
    root, problems = read_yaml(FILE, "d: &d {x: 1, y: 2}\ne:\n  <<: *d\n  y: 3\n")
    assert problems == []
    assert isinstance(root, Map)
    merged = root.entries["e"].value
    assert isinstance(merged, Map)
    assert {k: e.value.text for k, e in merged.entries.items() if isinstance(e.value, Scalar)} == {
        "x": "1",
        "y": "3",
    }


def test_alias_bomb_is_cheap() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    root, problems = read_yaml(FILE, "\n".join(lines) + "\n")
    assert problems == []
    assert isinstance(root, Map)


def test_empty_truncated_and_multi_document_files() -> None:
    assert read_yaml(FILE, "")[1][0].message.startswith("the file is empty")
    assert read_yaml(FILE, "# just a comment\n")[1][0].line == 1
    _, problems = read_yaml(FILE, "a:\n  b: [1, 2\n")
    assert problems[0].message.startswith("YAML syntax error")
    assert problems[0].line == 2
    _, problems = read_yaml(FILE, "a: 1\n---\nb: 2\n")
    assert problems[0].line == 2  # the '---' that begins the second document
    assert "several YAML documents" in problems[0].message
