"""The gotcha index: complete, searchable, cited correctly by findings, and its docs current."""

import json
import re

import pytest

from gpuops import gotcha as G
from gpuops import profiles as P
from gpuops.errors import UsageError


def test_index_has_every_universal_id_and_the_platform_ids():
    ids = set(G.index())
    assert {f"U{n}" for n in range(1, 44)} <= ids
    assert {"AD1", "AD4", "AD-DANGER", "RP3", "VAST2", "LAM6", "PS2", "GS4", "LR1", "SLURM5", "K8S4", "GEN8"} <= ids
    for e in G.index().values():
        assert e.title and e.symptom and e.cause and e.fix and e.keywords, e.id


@pytest.mark.parametrize("query,expected", [
    ("inode", {"U7", "AD4"}),
    ("xid", {"U22"}),
    ("crlf", {"U26", "GEN4"}),
    ("stdin", {"U34", "U17"}),
    ("zombie", {"U11", "U16"}),
    ("egress cost", {"U14"}),
    ("terminate volume", {"RP3"}),
])
def test_keyword_search_finds_the_expected_ids(query, expected):
    hits, total = G.search(query, limit=5)
    assert expected <= {h.id for h in hits}, [h.id for h in hits]
    assert total >= len(expected)


def test_search_ranks_the_main_entry_first():
    assert G.search("inode")[0][0].id == "U7"
    assert G.search("xid")[0][0].id == "U22"
    assert G.search("crlf")[0][0].id == "U26"


@pytest.mark.parametrize("query,first", [("ad4", "AD4"), ("AD-DANGER", "AD-DANGER"), ("u33", "U33")])
def test_search_by_id(query, first):
    assert G.search(query)[0][0].id == first


def test_search_is_bounded_and_rejects_bad_input():
    hits, total = G.search("disk", limit=2)
    assert len(hits) == 2 and total > 2
    with pytest.raises(UsageError):
        G.search("  ")
    with pytest.raises(UsageError):
        G.search("disk", limit=0)
    assert G.search("qwertyuiop") == ([], 0)


def test_cli_gotcha_inode_is_useful_and_bounded(cli_inproc):
    r = cli_inproc("gotcha", "--query", "inode")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("U7: ") and "df -i" in r.stdout and "AD4" in r.stdout
    assert len(r.stdout.splitlines()) <= 15
    j = json.loads(cli_inproc("gotcha", "--query", "inode", "--json", "--limit", "1").stdout)
    assert j["ok"] and j["data"]["total"] >= 2 and [h["id"] for h in j["data"]["hits"]] == ["U7"]


def test_cli_gotcha_errors(cli_inproc):
    assert cli_inproc("gotcha").returncode == 2
    missing = cli_inproc("gotcha", "--query", "qwertyuiop")
    assert missing.returncode == 4 and "no gotcha matches" in missing.stderr


def test_every_platform_gotcha_names_real_profiles_and_is_listed_by_them():
    names = set(P.names())
    listed = {g for n in names for g in P.load(n).gotchas}
    for e in G.index().values():
        assert set(e.platforms) <= names, e.id
        if e.platforms:
            assert e.id in listed, f"{e.id} is pinned to {e.platforms} but no profile lists it"


def test_prevention_verbs_are_gpuops_verbs():
    verbs = {"launch", "status", "logs", "stop", "retry", "queue", "push", "pull", "verify", "preflight",
             "reap", "diagnose", "triage", "teardown-check"}
    for e in G.index().values():
        for p in e.prevented_by:
            assert p.verb in verbs and p.how, e.id
        for f in e.cited_by:
            assert re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)+", f), e.id


def test_bad_index_entry_is_reported_with_line(tmp_path):
    bad = tmp_path / "gotchas.toml"
    bad.write_text('[U1]\ntitle = "t"\ntheme = "nonsense"\nsymptom = "s"\ncause = "c"\nfix = "f"\nkeywords = []\n')
    with pytest.raises(UsageError) as err:
        G.load_index(bad)
    assert ":3: U1.theme: 'nonsense' is not one of" in err.value.message
    bad.write_text('[U1]\ntitle = "t"\ntheme = "disk"\nsymptom = "s"\ncause = "c"\nfix = "f"\nkeywords = []\n'
                   'see = ["U99"]\n')
    with pytest.raises(UsageError) as err:
        G.load_index(bad)
    assert ":8: U1.see[0]: refers to unknown gotcha 'U99'" in err.value.message
