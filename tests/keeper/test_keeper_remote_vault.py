"""A vault on another machine (`--vault HOST:DIR`, issue 36), over real sshd boxes and real torch on
the CPU: the run's box is killed outright and the run finishes on another box from the checkpoint
the vault host held; and how HOST:DIR is told from a local path."""

import pytest

from gpuops import errors
from gpuops.keeper import start
from gpuops.keeper import vault as vaultmod
from gpuops.keeper.remotevault import RemoteVault, VaultError
from gpuops.placement import request
from gpuops.jobs import runpolicy
from tests.keeper.test_keeper_boxes import LOST_AFTER_S, command, killed_and_moved, kinds, rec
from tests.jobs.helpers import wait_for


@pytest.mark.parametrize("text, parsed", [
    ("/srv/vault", (None, "/srv/vault")),
    ("./a:b", (None, "./a:b")),  # a ':' after a '/': a local path
    ("/abs/a:b", (None, "/abs/a:b")),
    ("vaulthost:/srv/vault", ("vaulthost", "/srv/vault")),
    ("me@vault-1.lan:~/vault", ("me@vault-1.lan", "vault")),  # under the home directory there
    ("vaulthost:~", ("vaulthost", ".")),
    ("vaulthost:rel/dir", ("vaulthost", "rel/dir")),
])
def test_vault_forms_are_told_apart(text, parsed):
    assert vaultmod.parse(text) == parsed


@pytest.mark.parametrize("text", ["", "vaulthost:", ":dir", "-oProxyCommand=x:dir", "bad host:/v", "h:~other/v",
                                  "h:/v\n", "h\x00:/v"])
def test_a_bad_vault_is_a_one_line_usage_error(text):
    with pytest.raises(errors.UsageError) as e:
        vaultmod.parse(text)
    assert e.value.exit_code == 2 and "\n" not in e.value.message


def test_the_cli_refuses_a_bad_vault_with_exit_2(cli, tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[host]]\nalias = "nowhere"\n')
    r = cli("launch", "--fleet", str(fleet), "--vault", "vaulthost:", "--gpus", "1", "--cmd", "true",
            "--checkpoint-dir", "ckpt", "--resume-arg=--resume {checkpoint}")
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "HOST:DIR" in r.stderr


def test_a_box_killed_outright_finishes_on_another_from_the_vault_host(fleet):
    v = fleet.host()  # the always-on vault host: a box of its own, not in the fleet
    a, b = fleet.box(2.0), fleet.box(3.0)
    policy = runpolicy.build(checkpoint_dir="ckpt", resume_arg="--resume {checkpoint}")
    spec = start.spec_of(command=command(steps=20), fleet=str(fleet.file), vault_dir=f"{v}:{fleet.home(v)}/vault",
                         policy=policy, request=request(1), lost_after_s=LOST_AFTER_S)
    doc = start.launch(spec)
    assert doc["ok"], doc["summary"]
    run = doc["data"]["job"]["job_id"]
    there = fleet.home(v) / "vault" / run  # the vault host's directory (loopback: readable here too)
    assert doc["data"]["keeper"]["vault"] == f"{v}:{there.resolve()}"
    kept = RemoteVault(v, str(there.parent.resolve()), run)

    def held():
        return [h["name"] for h in kept.held()]

    assert wait_for(lambda: any(n != "checkpoint-5" for n in held()), timeout=90, every=1.0), kinds(rec(run))
    r = killed_and_moved(fleet, run, a, b)  # finished on b within --lost-after + 90 s
    resumed = r["attempts"][1]["resumed_from"]
    step = int(resumed.rsplit("-", 1)[1])
    assert step >= 10  # a checkpoint the vault host held when a was lost
    box_log = next(fleet.jobs(b).glob("*/log")).read_text()
    assert f"resumed from {fleet.home(b)}/ckpt/{resumed} at step {step + 1}" in box_log, box_log[-2000:]
    assert "final step 20" in box_log
    # on the vault host: the final checkpoint, held (its manifest beside it), nothing left under way
    assert "checkpoint-20" in held()
    assert (there / "checkpoints" / ".checkpoint-20.gpuops-manifest.json").is_file()
    assert [p.name for p in (there / ".incoming").iterdir() if not p.name.endswith(".gpuops-lock")] == []
    assert (there / "boxes").is_dir() and any((there / "boxes").iterdir())  # the run's log and events too
    assert not (fleet.vault / run).exists()  # nothing kept in a local vault


def test_a_vault_host_out_of_reach_is_a_vault_error_not_the_boxs(fleet):
    v = fleet.host()
    kept = RemoteVault(v, str(fleet.home(v) / "vault"), "run-1").make()
    assert kept.held() == [] and kept.dir == f"{(fleet.home(v) / 'vault').resolve()}/run-1"
    fleet.boxes[v].stop()
    with pytest.raises(VaultError) as e:  # the keeper waits for it; a HostError would count against the run's box
        kept.held()
    assert not isinstance(e.value, errors.HostError) and e.value.message.startswith(f"vault host {v}: ")
