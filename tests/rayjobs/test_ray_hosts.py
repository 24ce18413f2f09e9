"""A --host that is not a usable Ray head is one line with its own exit code and nothing
recorded: ray not installed (4), no head on the box (2), a head whose dashboard does not answer
(3), something that is not Ray at the address (2). And preflight on the head reports the cluster."""

import http.server
import threading

import pytest

from gpuops import errors
from gpuops.ops import jobs as op, preflight
from gpuops.remote.targets import target_for
from tests.rig.sshd import free_port

SYSTEM_PATH = "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture(scope="module")
def not_ray():
    """An HTTP server that is not Ray's dashboard (it answers 404 to everything)."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    server.RequestHandlerClass.log_message = lambda *a: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture(scope="module")
def boxes(rig, ray_cluster, tmp_path_factory, not_ray):
    empty = tmp_path_factory.mktemp("noray")
    closed = f"http://127.0.0.1:{free_port()}"
    with_ray = ray_cluster.env()
    return {
        # a login whose shell startup (its HOME's .bashrc) puts no Python environment with ray on PATH
        "without": rig.box("rayless", env={"PATH": SYSTEM_PATH, "HOME": str(empty), "RAY_TMPDIR": str(empty),
                                           "RAY_ADDRESS": closed}),
        "headless": rig.box("rayheadless", env=dict(with_ray, RAY_TMPDIR=str(empty), RAY_ADDRESS=closed)),
        "deaf": rig.box("raydeaf", env=dict(with_ray, RAY_ADDRESS=closed)),
        "other": rig.box("rayother", env=dict(with_ray, RAY_ADDRESS=f"http://127.0.0.1:{not_ray}")),
    }


@pytest.mark.parametrize("which,kind,code,said", [
    ("without", errors.NotFound, errors.NOT_FOUND, "ray is not installed on this box"),
    ("headless", errors.UsageError, errors.USAGE, "no Ray head on this box"),
    ("deaf", errors.Unreachable, errors.HOST, "dashboard does not answer"),
    ("other", errors.UsageError, errors.USAGE, "no Ray Jobs API at"),
])
def test_a_host_that_is_no_usable_ray_head_is_one_line_with_its_own_code(boxes, tmp_path, which, kind, code, said):
    jobs = tmp_path / "jobs"
    target = target_for(boxes[which].spec)
    try:
        with pytest.raises(kind) as e:
            op.launch(target, command="true", engine="ray", jobs_dir=str(jobs))
    finally:
        target.close()
    assert type(e.value) is kind and e.value.exit_code == code and said in e.value.message, e.value.message
    assert "\n" not in e.value.message and "Traceback" not in e.value.message
    assert not (jobs.exists() and [p for p in jobs.iterdir() if p.is_dir()])  # no job directory


def test_preflight_on_the_head_reports_the_cluster(box):
    doc = preflight.preflight(box)
    cluster = doc["data"]["engines"]["ray"]
    assert cluster["nodes"][0]["state"] == "ALIVE" and cluster["nodes"][0]["ray_cpus"] == 2
    found = {f["id"]: f for f in doc["findings"] if f["id"].startswith("ray.")}
    assert found["ray.dashboard"]["severity"] == "ok" and found["ray.nodes"]["severity"] == "ok"
    assert found["ray.object_store"]["evidence"]["object_store_bytes"] == 200 << 20
    assert found["ray.resources"]["severity"] in ("ok", "warn")  # the rig gives Ray 2 CPUs of the box's
