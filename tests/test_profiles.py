"""Platform profiles: shipped files validate, broken files fail precisely, survival and guessing."""

import json
import os

import pytest

from gpuops import profiles as P
from gpuops import tomlschema
from gpuops.errors import NotFound, UsageError
from gpuops.profiles_guess import guess
from tests.conftest import FIXTURES

FIX = FIXTURES / "profiles"
SHIPPED = {"autodl", "runpod", "vastai", "lambda", "paperspace", "matpool", "gpushare", "featurize", "lanrui",
           "generic-ssh", "slurm", "kubernetes", "local"}


@pytest.fixture
def no_user_profiles(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_PROFILES_DIR", str(tmp_path / "none"))


def test_every_shipped_profile_validates(no_user_profiles):
    loaded = {p.name: p for p in P.all_profiles()}
    assert set(loaded) == SHIPPED
    for p in loaded.values():
        assert p.origin == "shipped" and p.storage and p.summary
    rentals = [p for p in loaded.values() if p.kind in ("ssh-rental", "cloud-api")]
    assert all(p.gotchas for p in rentals)


def test_autodl_facts_that_verbs_act_on(no_user_profiles):
    p = P.load("autodl")
    assert p.billing.meter_stop_is == "pause" and p.launch.detach == "tmux"
    assert p.launch.proxy_hook.startswith("source /etc/network_turbo")
    assert p.paths.tensorboard_logdir == "/root/tf-logs"
    assert {c.after_s for c in p.clocks} == {15 * 86400}
    fs = {d["role"]: d for d in p.preflight_paths()}
    assert fs["durable_dir"] == {"role": "durable_dir", "path": "/root/autodl-fs", "inode_cap": 200000}
    assert fs["data_dir"]["inode_cap"] == 0
    assert p.preflight["disk_min_free_inodes"] == 20000


def test_profile_thresholds_override_the_defaults(no_user_profiles):
    thresholds = pytest.importorskip("gpuops.checks.thresholds")
    merged = P.thresholds(P.load("autodl"))
    assert merged["disk_min_free_inodes"] == 20000 != thresholds.DEFAULTS["disk_min_free_inodes"]


@pytest.mark.parametrize("fixture,line,key,problem", [
    ("bad-type", 8, "ssh.user", "expected a string, got integer 7"),
    ("unknown-key", 27, "interruption.preemptible", "unknown key"),
    ("missing-key", 15, "billing.meter_stop_is", "required key is missing"),
    ("bad-tier", 23, "storage[0].survives_destroy", "expected true or false"),
    ("unknown-gotcha", 5, "gotchas[1]", "'NOPE1' is not in references/gotchas.toml"),
])
def test_broken_profile_names_file_line_and_key(fixture, line, key, problem):
    with pytest.raises(UsageError) as err:
        P.load_file(FIX / "broken" / f"{fixture}.toml")
    message = err.value.message
    assert message.startswith(f"tests/fixtures/profiles/broken/{fixture}.toml:{line}: {key}: ")
    assert problem in message and "\n" not in message


def test_bad_toml_names_line_and_key():
    with pytest.raises(UsageError) as err:
        P.load_file(FIX / "broken" / "bad-toml.toml")
    assert err.value.message.startswith("tests/fixtures/profiles/broken/bad-toml.toml:3: not valid TOML in key 'title'")


@pytest.mark.parametrize("fixture,problem", [
    ("bad-threshold", "unknown preflight threshold 'no_such_threshold'"),
    ("bad-threshold-value", "must be a number"),
])
def test_preflight_overrides_are_checked_against_the_thresholds(fixture, problem):
    pytest.importorskip("gpuops.checks.thresholds")
    with pytest.raises(UsageError) as err:
        P.load_file(FIX / "broken" / f"{fixture}.toml")
    assert f"{fixture}.toml:35: preflight." in err.value.message and problem in err.value.message


def _minimal(tmp_path, name, replace=None, extra=""):
    """The minimal valid fixture profile (bad-threshold-value.toml without its bad [preflight]),
    with one line replaced or text added, written as tmp_path/<name>.toml."""
    text = (FIX / "broken" / "bad-threshold-value.toml").read_text().split("[preflight]")[0]
    if replace:
        assert replace[0] in text
        text = text.replace(replace[0], replace[1])
    path = tmp_path / f"{name}.toml"
    path.write_text(text + extra)
    return path


GRACE = "interruption.grace_s"


@pytest.mark.parametrize("replace,line,key,problem", [
    (("spot = false", "spot = false\ngrace_s = nan"), 27, GRACE, "expected a finite number, got number nan"),
    (("spot = false", "spot = false\ngrace_s = -inf"), 27, GRACE, "expected a finite number"),
    (("spot = false", "spot = false\ngrace_s = -1.5"), 27, GRACE, "must be at least 0, got number -1.5"),
    (("survives_destroy = false", "survives_destroy = false\ninode_cap = -5"), 24, "storage[0].inode_cap",
     "must be at least 0, got integer -5"),
    (('egress = "unknown"', 'egress = "unknown"\negress_per_gb_usd = inf'), 30, "network.egress_per_gb_usd",
     "expected a finite number, got number inf"),
])
def test_a_profile_number_out_of_range_names_file_line_and_key(tmp_path, replace, line, key, problem):
    # Found in review: `grace_s = nan` and `inode_cap = -5` loaded without a word.
    path = _minimal(tmp_path, "odd", replace)
    with pytest.raises(UsageError) as err:
        P.load_file(path)
    assert err.value.message.startswith(f"{path}:{line}: {key}: ") and problem in err.value.message


def test_a_nan_threshold_override_is_refused(tmp_path):
    path = _minimal(tmp_path, "nan-threshold", extra="[preflight]\ndisk_min_free_gib = nan\n")
    with pytest.raises(UsageError) as err:
        P.load_file(path)
    assert err.value.message == (f"{path}:35: preflight.disk_min_free_gib: preflight threshold 'disk_min_free_gib' "
                                 "must be a finite number, got nan")


def test_deeply_nested_toml_is_a_one_line_usage_error(cli, tmp_path):
    # Found in review: a 3000-deep nested array exited 70 (RecursionError inside tomllib).
    path = _minimal(tmp_path, "deep", extra="[preflight]\nrendezvous_ports = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(UsageError) as err:
        P.load_file(path)
    assert err.value.message == f"{path}:35: arrays or tables nested more than 32 deep"
    env = dict(os.environ, GPUOPS_PROFILES_DIR=str(tmp_path))
    r = cli("profiles", "--name", "deep", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert "deep.toml:35: arrays or tables nested more than 32 deep" in r.stderr
    j = cli("profiles", "--name", "deep", "--json", env=env)
    assert j.returncode == 2 and json.loads(j.stdout)["error"]["kind"] == "usage"


BRACKETS = "[{" * 40


@pytest.mark.parametrize("text", [
    f'a = "{BRACKETS}"', f"a = '{BRACKETS}'", f'a = """\n{BRACKETS}\n"""', f"a = '''{BRACKETS}'''",
    f'a = """x\\"""{BRACKETS}"""', f'a = """x""""\nb = 1 # {BRACKETS}', f"# {BRACKETS}\nb = 1",
    "a = " + "[" * 32 + "]" * 32,
])
def test_brackets_in_strings_and_comments_are_no_nesting(text):
    assert tomlschema._too_deep(text) == 0


@pytest.mark.parametrize("text,line", [
    ("a = " + "[" * 33 + "]" * 33, 1),
    ('a = """x""""\nb = [\n' + "{ x = " * 40 + "1" + " }" * 40 + "\n]", 3),
])
def test_nesting_deeper_than_the_bound_is_found_on_its_line(text, line):
    assert tomlschema._too_deep(text) == line


def test_cli_reports_a_broken_user_profile_in_one_line(cli, tmp_path):
    env = dict(os.environ, GPUOPS_PROFILES_DIR=str(FIX / "broken"))
    r = cli("profiles", "--name", "unknown-key", env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "unknown-key.toml:27: interruption.preemptible: unknown key" in r.stderr
    j = cli("profiles", "--name", "bad-toml", "--json", env=env)
    assert j.returncode == 2 and json.loads(j.stdout)["error"]["kind"] == "usage"


def test_user_profiles_come_from_xdg_config_and_override_shipped(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUOPS_PROFILES_DIR", raising=False)
    user = tmp_path / "gpuops" / "profiles"
    user.mkdir(parents=True)
    (user / "runpod.toml").write_text((FIX / "user" / "runpod.toml").read_text())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    p = P.load("runpod")
    assert p.origin == "user" and p.title == "RunPod with a network volume"
    assert P.destination_survives(p, "/workspace/ckpt")[0] is True
    assert "runpod" in P.names() and "autodl" in P.names()


def test_unknown_and_malformed_names(no_user_profiles):
    with pytest.raises(NotFound):
        P.load("no-such-platform")
    with pytest.raises(UsageError):
        P.load("../etc/passwd")


@pytest.mark.parametrize("name,path,verb,survives", [
    ("autodl", "/root/autodl-tmp/run/best.pt", "stop", True),
    ("autodl", "/root/autodl-tmp/run/best.pt", "destroy", False),
    ("autodl", "/root/autodl-fs/best.pt", "destroy", True),
    ("runpod", "/workspace/best.pt", "stop", False),
    ("runpod", "/workspace/best.pt", "pause", True),
    ("runpod", "/root/notes.txt", "pause", False),
    ("runpod", "/runpod-volume/best.pt", "stop", True),
    ("lambda", "/lambda/nfs/team-fs/best.pt", "stop", True),
    ("lambda", "checkpoints/best.pt", "stop", False),
    ("gpushare", "/root/code", "stop", False),
    ("gpushare", "/hy-netdisk/ckpt", "destroy", True),
    ("slurm", "/scratch/alice/ckpt", "stop", True),
    ("slurm", "$TMPDIR/ckpt", "stop", False),
    ("slurm", "/opt/unknown", "stop", False),
    ("local", "/anything", "destroy", True),
])
def test_destination_survives(no_user_profiles, name, path, verb, survives):
    ok, reason = P.destination_survives(P.load(name), path, verb)
    assert ok is survives, reason
    assert reason


def test_destination_survives_reason_names_tier_and_verb(no_user_profiles):
    ok, reason = P.destination_survives(P.load("runpod"), "/workspace/x")
    assert not ok and "volume disk" in reason and "terminate" in reason
    with pytest.raises(UsageError):
        P.destination_survives(P.load("runpod"), "/x", verb="nuke")


def test_guess_from_box_facts(no_user_profiles):
    profiles = P.all_profiles()
    autodl = guess({"hostname": "autodl-container-5f1c2a-7d", "mounts": ["/", "/root/autodl-fs"],
                    "env": [], "files": ["/etc/network_turbo"]}, profiles)
    assert autodl[0]["name"] == "autodl" and len(autodl[0]["evidence"]) == 3
    lam = guess({"hostname": "x", "mounts": ["/lambda/nfs/team"], "env": {"PATH": "/bin"}}, profiles)
    assert [g["name"] for g in lam] == ["lambda"]
    assert guess({"hostname": "box", "mounts": ["/", "/mnt"], "env": ["HOME"], "files": []}, profiles) == []


def test_profiles_guess_over_ssh_reports_without_applying(rig, cli):
    box = rig.box("slurmish", env={"SLURM_JOB_ID": "4242"})
    r = cli("profiles", "--host", box.spec, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["data"]["guess"] == "slurm"
    assert "$SLURM_JOB_ID is set" in doc["data"]["candidates"][0]["evidence"]
    assert "not applied" in doc["summary"]
    assert box.exec_requests() == 1


def test_cli_list_and_show_are_bounded(cli, tmp_path):
    env = dict(os.environ, GPUOPS_PROFILES_DIR=str(tmp_path))
    listing = cli("profiles", env=env)
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) == len(SHIPPED) + 2  # header, summary
    shown = cli("profiles", "--name", "autodl", env=env)
    assert shown.returncode == 0
    assert "/root/autodl-fs" in shown.stdout and "AD-DANGER" in shown.stdout and "200,000 inodes" in shown.stdout
    assert len(shown.stdout.splitlines()) < 40
    doc = json.loads(cli("profiles", "--name", "vastai", "--json", env=env).stdout)
    assert doc["data"]["billing"]["meter_stop_is"] == "destroy"
    assert doc["data"]["deleted_by_meter_stop"] == ["container disk"]


def test_key_lines_understands_tables_arrays_and_multiline_values():
    text = '\n'.join([
        'a = 1',                       # 1
        'long = """',                  # 2
        'b = not a key',               # 3
        '"""',                         # 4
        'list = [',                    # 5
        '  "x",',                      # 6
        ']',                           # 7
        '[t]',                         # 8
        'env = { K = "v" }',           # 9
        'x.y = 2',                     # 10
        '[[arr]]',                     # 11
        'n = 1',                       # 12
        '[[arr]]',                     # 13
        'n = 2  # comment [',          # 14
        'm = 3',                       # 15
    ])
    lines = tomlschema.key_lines(text)
    assert lines[("a",)] == 1 and lines[("long",)] == 2 and ("b",) not in lines
    assert lines[("t", "env")] == 9 and lines[("t", "x", "y")] == 10
    assert lines[("arr", 0, "n")] == 12 and lines[("arr", 1, "n")] == 14 and lines[("arr", 1, "m")] == 15
