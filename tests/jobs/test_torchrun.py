"""The torchrun command line and rendezvous environment (gpuops.jobs.torchrun): exact words, refused
values, and what the installed torch and a real sh make of them."""

import subprocess

import pytest

from gpuops.jobs import torchrun


def _gang_node(**over):
    kw = dict(nnodes=2, nproc_per_node=8, endpoint=torchrun.endpoint("10.0.0.5", 29500), rdzv_id="g-1",
              is_host=True, local_addr="10.0.0.5", max_restarts=0)
    kw.update(over)
    return torchrun.command(["train.py", "--lr", "3e-4"], **kw)


def test_a_gang_nodes_words():
    assert _gang_node() == [
        "torchrun", "--nnodes", "2", "--nproc-per-node", "8", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", "10.0.0.5:29500", "--rdzv-id", "g-1", "--rdzv-conf", "is_host=1",
        "--local-addr", "10.0.0.5", "--max-restarts", "0", "train.py", "--lr", "3e-4"]


def test_c10d_gets_no_node_rank_and_static_needs_one():
    assert "--node-rank" not in _gang_node(node_rank=1)  # torchrun ignores it for c10d, with a warning
    words = _gang_node(backend="static", node_rank=1, is_host=None, local_addr=None)
    assert words[words.index("--node-rank") + 1] == "1"
    with pytest.raises(ValueError, match="needs each node's rank"):
        _gang_node(backend="static")


def test_a_slurm_batch_line_keeps_its_variables_for_the_shell():
    words = torchrun.command(["-m", "pkg.train"], nnodes="$SLURM_NNODES", nproc_per_node="${SLURM_GPUS_ON_NODE}",
                             endpoint=torchrun.endpoint("$HEAD", 29500), rdzv_id="$SLURM_JOB_ID",
                             launcher=("srun", "torchrun"))
    line = torchrun.shell_line(words)
    assert line.startswith('srun torchrun --nnodes "$SLURM_NNODES" --nproc-per-node "${SLURM_GPUS_ON_NODE}" ')
    out = subprocess.run(["sh", "-c", f"set -- {line}; printf '%s\\n' \"$@\""], capture_output=True, text=True,
                         env={"SLURM_NNODES": "3", "SLURM_GPUS_ON_NODE": "4", "HEAD": "node-a",
                              "SLURM_JOB_ID": "77", "PATH": "/usr/bin:/bin"}, check=True).stdout.split("\n")
    assert out[:14] == ["srun", "torchrun", "--nnodes", "3", "--nproc-per-node", "4", "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", "node-a:29500", "--rdzv-id", "77", "-m", "pkg.train"]


def test_script_words_reach_the_shell_as_they_are():
    words = torchrun.command(["train.py", "--name", "it's $HOME; rm -rf /"], nnodes=1, nproc_per_node=1,
                             endpoint=torchrun.endpoint("127.0.0.1"), rdzv_id="x")
    out = subprocess.run(["sh", "-c", f"set -- {torchrun.shell_line(words)}; printf '%s\\n' \"$@\""],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "it's $HOME; rm -rf /"


@pytest.mark.parametrize("over,words", [
    ({"nnodes": 0}, "nnodes must be a whole number"),
    ({"nnodes": "2; reboot"}, "nnodes must be a whole number"),
    ({"nproc_per_node": True}, "nproc_per_node"),
    ({"rdzv_id": "a b"}, "rendezvous id"),
    ({"backend": "etcd-v2"}, "gpuops starts c10d or static"),
    ({"local_addr": "10.0.0.5 --evil"}, "local address"),
])
def test_values_that_cannot_be_are_refused(over, words):
    with pytest.raises(ValueError, match=words):
        _gang_node(**over)


def test_options_leave_the_script_to_the_caller():
    words = torchrun.options(nnodes=1, nproc_per_node=2, endpoint="h:1", rdzv_id="x")
    assert words[-2:] == ["--rdzv-id", "x"]
    with pytest.raises(ValueError, match="needs a training script"):
        torchrun.command([], nnodes=1, nproc_per_node=2, endpoint="h:1", rdzv_id="x")


def test_endpoints():
    assert torchrun.endpoint("fe80::1", 29400) == "[fe80::1]:29400"
    assert torchrun.endpoint("$MASTER", "$PORT") == "$MASTER:$PORT"
    for host, port in (("a b", 1), ("h", 0), ("h", 70000), ("h", "29500")):
        with pytest.raises(ValueError):
            torchrun.endpoint(host, port)


def test_interfaces_between_hosts():
    env = torchrun.environment("ens5")
    assert env == {"NCCL_SOCKET_IFNAME": "ens5", "GLOO_SOCKET_IFNAME": "ens5", "TP_SOCKET_IFNAME": "ens5"}
    for bad in ("lo", "docker0", "virbr0", "veth1a2b", "br-0f3c"):
        assert torchrun.interface_problem(bad) is not None
        with pytest.raises(ValueError, match="other hosts cannot reach"):
            torchrun.environment(bad)
    assert torchrun.interface_problem("lowpan0") is None
    assert torchrun.interface_problem("lo", multi_host=False) is None  # one host: loopback is the way
    assert torchrun.environment("lo", multi_host=False)["GLOO_SOCKET_IFNAME"] == "lo"
    assert torchrun.interface_problem("eth0; x") == "'eth0; x' is not an interface name"
    assert torchrun.environment() == {"NCCL_SOCKET_IFNAME": "^lo,docker,virbr,veth,br-,cni,cali"}
    assert torchrun.environment("$IFACE")["GLOO_SOCKET_IFNAME"] == "$IFACE"


def test_the_installed_torchrun_understands_every_word():
    run = pytest.importorskip("torch.distributed.run", reason="torch is the test extra's")
    args = run.get_args_parser().parse_args(_gang_node(join_timeout_s=900)[1:])
    assert (args.nnodes, args.nproc_per_node, args.rdzv_backend) == ("2", "8", "c10d")
    assert (args.rdzv_endpoint, args.rdzv_id, args.local_addr, args.max_restarts) == ("10.0.0.5:29500", "g-1",
                                                                                       "10.0.0.5", 0)
    assert args.rdzv_conf == "is_host=1,join_timeout=900"
    assert (args.training_script, args.training_script_args) == ("train.py", ["--lr", "3e-4"])


def test_an_elastic_nnodes_is_passed_to_torchrun_and_checked_against_the_gang():
    from gpuops.errors import UsageError
    from gpuops.ops.gang import elastic_nnodes

    words = torchrun.options(nnodes="1:4", nproc_per_node=1, endpoint="h:29500", rdzv_id="g", max_restarts=3)
    assert words[words.index("--nnodes") + 1] == "1:4" and words[words.index("--max-restarts") + 1] == "3"
    with pytest.raises(ValueError):
        torchrun.options(nnodes="4:1", nproc_per_node=1, endpoint="h:29500", rdzv_id="g")
    assert elastic_nnodes(None, 2) == 2 and elastic_nnodes("1:3", 2) == "1:3"
    for bad in ("3:4", "1:1", "2", "a:b", "1:65"):
        with pytest.raises(UsageError):
            elastic_nnodes(bad, 2)
