"""The rules by which a page's sample output is compared (tests/doc_snippets.py), and a
guard that no example hides from them."""

from __future__ import annotations

import re
from pathlib import Path

from tests.doc_snippets import normalise, output_matches, parse_console

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)


def test_a_console_block_is_commands_each_with_its_output() -> None:
    commands = parse_console("$ export X=1\n$ zklocks ls\npath  kind\n/locks/a  lock\n")
    assert [(c.line, c.expected) for c in commands] == [
        ("export X=1", []),
        ("zklocks ls", ["path  kind", "/locks/a  lock"]),
    ]


def test_what_varies_between_runs_is_compared_loosely() -> None:
    shown = ["1  holding  lock  sleep 30  vm  25445  ≤4.3s  6"]
    real = ["1  holding  lock  sleep 30            vm    20140  ≤2.8s     34"]
    assert output_matches(shown, real)
    node = "/locks/x/lock-9f0ecd7ecd0f4d19aef2aca08576c736-0000000000"
    assert normalise(node) == normalise(node.replace("9f0e", "0000"))


def test_words_and_exit_statuses_are_compared_exactly() -> None:
    assert not output_matches(["zklocks: no such lock"], ["zklocks: not a lock"])
    assert not output_matches(["exit status 75"], ["exit status 0"])
    assert not output_matches(["a line"], ["a line", "and one more"])


def test_an_ellipsis_line_stands_for_any_lines() -> None:
    assert output_matches(["{", "...", "}"], ["{", '  "a": 1,', '  "b": 2', "}"])
    assert output_matches(["{", "...", "}"], ["{", "}"])
    assert not output_matches(["{", "...", "}"], ["{", '  "a": 1'])


def test_a_line_ending_in_an_ellipsis_stands_for_any_end_of_that_line() -> None:
    """doctor's finding names the server's own bug: another on ZooKeeper 3.9 than 3.8."""
    shown = ["  finding  member 127.0.0.1:2181: ZOOKEEPER-4785: ...", "    fix: upgrade ZooKeeper"]
    assert output_matches(shown, [shown[0][:-3] + "Txn loss due to race", shown[1]])
    member = "member 127.0.0.1:2181: ZOOKEEPER"
    assert output_matches(shown, [f"  finding  {member}-4925: Diff", shown[1]])
    assert not output_matches(shown, [f"     note  {member}-4837: x", shown[1]])
    assert not output_matches(shown, [shown[0][:-3] + "x", "extra line", shown[1]])


def test_every_shell_sample_is_tagged_console_so_that_it_runs() -> None:
    """A block of ``$ `` lines without the ``console`` tag would never be checked."""
    untagged = [
        f"{page.relative_to(ROOT)}: ```{info}"
        for page in PAGES
        for info, body in FENCE.findall(page.read_text())
        if info.split()[:1] != ["console"] and body.lstrip().startswith("$ ")
    ]
    assert untagged == []
