import json

import pytest

from gpuops import errors
from gpuops.remote import target_for
from gpuops.remote.hostspec import parse, resolve, split_hosts


@pytest.fixture(params=["openssh", "paramiko"], autouse=True)
def transport(request, monkeypatch):
    """Every transport test runs over both the OpenSSH client and paramiko."""
    monkeypatch.setenv("GPUOPS_TRANSPORT", request.param)
    return request.param


def test_split_hosts_defaults_to_this_machine():
    assert split_hosts(None) == ["local"]
    assert split_hosts(" a, b ,,c") == ["a", "b", "c"]


@pytest.mark.parametrize("spec,expected", [
    ("box", (None, "box", None)),
    ("alice@10.0.0.5:2222", ("alice", "10.0.0.5", 2222)),
    ("root@[::1]:22", ("root", "::1", 22)),
])
def test_parse_host_spec(spec, expected):
    assert parse(spec) == expected


@pytest.mark.parametrize("bad", ["a b", "user@", "host:99999", "host:port"])
def test_bad_host_spec_is_a_usage_error(bad):
    with pytest.raises(errors.UsageError):
        parse(bad)


def test_alias_resolves_through_ssh_config(rig, plain_box):
    spec = resolve(plain_box.spec)
    assert (spec.hostname, spec.port) == ("127.0.0.1", plain_box.port)
    assert str(rig.client_key) in spec.identity_files
    assert str(rig.known_hosts) in spec.known_hosts


def test_run_over_ssh_passes_stdin_and_exit_code(plain_box):
    t = target_for(plain_box.spec)
    try:
        r = t.run("cat; echo err >&2; exit 7", stdin=b"payload")
    finally:
        t.close()
    assert (r.stdout, r.stderr, r.exit) == (b"payload", b"err\n", 7)


def test_first_use_records_host_key_then_changed_key_is_refused(rig, tmp_path, transport):
    box = rig.box(f"rekeyed-{transport}")
    t = target_for(box.spec)
    t.run("true")
    t.close()
    assert f"[127.0.0.1]:{box.port}" in rig.known_hosts.read_text()
    # The box is re-provisioned with a new host key on the same address.
    from tests.rig.sshd import keygen
    box.stop()
    box.host_key = keygen(tmp_path / "new_host_key")
    box.start()
    with pytest.raises(errors.HostKeyChanged) as err:
        target_for(box.spec).run("true")
    assert "ssh-keygen -R" in err.value.message


def test_remote_timeout_kills_the_command_on_the_box(plain_box, tmp_path):
    marker = tmp_path / "survived"
    t = target_for(plain_box.spec)
    try:
        r = t.run(f"sleep 3; touch {marker}", timeout_s=None)
        assert r.exit == 0 and marker.exists()
        marker.unlink()
        from gpuops.remote import wrap
        r = t.run(wrap.with_timeout(["sh", "-c", f"sleep 3; touch {marker}"], 1))
    finally:
        t.close()
    assert r.exit == 124
    import time
    time.sleep(2.5)
    assert not marker.exists(), "the remote command kept running after its timeout"


def test_onbox_script_reads_rest_of_stdin(plain_box):
    t = target_for(plain_box.spec)
    try:
        doc = t.run_onbox("probe")
    finally:
        t.close()
    assert doc["boot"]["boot_id"]
    json.dumps(doc)
