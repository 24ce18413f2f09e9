"""The .gpuopsignore matcher agrees with git itself on gitignore semantics (git is the oracle)."""

import os
import shutil
import subprocess

import pytest

from gpuops.onbox.sync.ignorerules import Rules, compile_rule

RULES = [
    "# a comment",
    "",
    "*.log",
    "!keep.log",
    "build/",
    "/top-only.txt",
    "docs/*.md",
    "**/cache",
    "data/**/tmp",
    "out/**",
    "a?c",
    "[0-9]*.ckpt",
    "!/out/final/",
    "trailing-space\\ ",
    "\\#literal",
    "\\!bang",
    "sub/dir/",
]

FILES = [
    "x.log", "keep.log", "logs/y.log", "logs/keep.log",
    "build/obj.o", "src/build/z", "buildx/f", "build.txt",
    "top-only.txt", "nested/top-only.txt",
    "docs/a.md", "docs/deep/b.md", "docs/a.txt",
    "cache/f", "x/y/cache/f", "x/cache/file", "cachex",
    "data/tmp/f", "data/a/b/tmp/f", "data/a/tmpx",
    "out/x", "out/final/f", "out/final/g/h",
    "abc", "a/c", "abbc", "axc/f",
    "1.ckpt", "x1.ckpt", "d/22.ckpt",
    "trailing-space ", "trailing-space",
    "#literal", "!bang",
    "sub/dir/f", "other/sub/dir/f", "sub/dirx",
    "plain.txt", "we ird $(x).txt", "ünï.log",
]


def _git_ignored(repo, rules=RULES, files=FILES):
    """The files git's own traversal leaves out under `rules` (empty dirs are invisible to git, so
    every directory case holds a file)."""
    if not shutil.which("git"):
        pytest.skip("git is not installed (it is the oracle for gitignore semantics)")
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("\n".join(rules) + "\n")
    for rel in files:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("x")
    out = subprocess.run(["git", "-C", str(repo), "-c", "core.quotePath=false", "ls-files", "--others", "--ignored",
                          "--exclude-standard", "-z"], capture_output=True, text=True, check=True)
    return {p for p in out.stdout.split("\0") if p and p != ".gitignore"}


def test_matches_git(tmp_path):
    expected = _git_ignored(tmp_path / "repo")
    rules = Rules(RULES)
    got = {rel for rel in FILES if rules.excluded(rel, False)}
    assert got == expected, f"only gpuops: {sorted(got - expected)}; only git: {sorted(expected - got)}"
    assert {"out/x", "build/obj.o", "data/a/b/tmp/f"} <= got and "keep.log" not in got  # the oracle said something


def test_comments_blanks_and_lone_slash_compile_to_nothing():
    assert compile_rule("# x") is None and compile_rule("   ") is None and compile_rule("/") is None
    assert Rules(["# c", "", "*.tmp"]).lines == ["*.tmp"]


def test_last_matching_rule_wins_and_dir_only_rules_skip_files():
    rules = Rules(["*.bin", "!big.bin", "big.bin"])
    assert rules.match("big.bin", False) and rules.match("x/small.bin", False)
    assert not Rules(["model/"]).match("model", False) and Rules(["model/"]).match("model", True)


def test_excluded_directory_cannot_be_reincluded_below():
    rules = Rules(["runs/", "!runs/best.pt"])
    assert rules.excluded("runs/best.pt", False)
    assert not rules.match("runs/best.pt", False)  # the rule alone would re-include it


def test_walker_prunes_with_the_rules(tmp_path):
    from gpuops.onbox.sync import manifest

    for rel in ("keep/a.py", "skip/b.py", "keep/c.log", "keep/!important.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    errors = []
    entries = manifest.walk(os.fsencode(tmp_path), Rules(["skip/", "*.log", "!\\!important.log"]), errors)
    assert [e[0] for e in entries] == ["keep", "keep/!important.log", "keep/a.py"] and errors == []


# Rules that the backtracking regexes got wrong or choked on, each checked alone against git.
EDGE_RULES = ["a/***/b", "***", "[\\]]x", "[a\\-]z", "x//", "//y", "trail\\", "*[!0-9].bak", "**/deep/**"]
EDGE_FILES = ["a/b", "a/x/y/b", "ab", "]x", "\\x", "az", "-z", "bz", "x/f", "y", "trail\\", "1.bak", "c.bak",
              "p/deep/q", "deep/q", "r/deep"]


@pytest.mark.parametrize("rule", EDGE_RULES)
def test_edge_patterns_match_git(tmp_path, rule):
    expected = _git_ignored(tmp_path / "repo", [rule], EDGE_FILES)
    rules = Rules([rule])
    got = {rel for rel in EDGE_FILES if rules.excluded(rel, False)}
    assert got == expected, f"only gpuops: {sorted(got - expected)}; only git: {sorted(expected - got)}"


@pytest.mark.parametrize("pattern,path,matches", [
    ("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "a" * 5000, False),
    ("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "b" * 5000 + "ab", False),
    ("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "a" * 5000 + "b", True),
    ("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "x/" * 200 + "ab" * 2000, True),
    ("*[ab]*[ab]*[ab]*[ab]*[ab]*[ab]*[ab]*c", "x" * 5000 + "c", False),
    ("*[ab]*[ab]*[ab]*[ab]*[ab]*[ab]*[ab]*c", "x" * 5000 + "abababac", True),
    ("*?*?*?*?*?*?*?*?*?*?*?*?*?*?*b", "ab" * 2500 + "c", False),
    ("a/**/a/**/a/**/a/**/a/**/b", "/".join(["a"] * 3000) + "/c", False),
    ("a/**/a/**/a/**/a/**/a/**/b", "/".join(["a"] * 3000) + "/b", True),
    ("**/*a*a*a*a*a*b/**/x", "/".join(["a" * 50] * 100) + "/x", False),
])
def test_many_stars_against_a_long_path_cost_at_most_pattern_times_path(pattern, path, matches):
    # Found in review: `verify --exclude '*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b'` (or the same line in
    # .gpuopsignore) ran for minutes: the pattern was a backtracking regex.
    glob, _, _ = compile_rule(pattern)
    assert glob.match_names(path.split("/")) is matches
    assert glob.work <= len(pattern) * len(path)
    assert Rules([pattern]).excluded(path, False) is matches
