"""Many hosts at once (gpuops.remote.fanout): order kept, each failure its own outcome, a Ctrl-C
that ends the verb without waiting for the hosts still being asked."""

import signal
import subprocess
import sys
import threading
import time

from gpuops.remote import fanout


def test_outcomes_keep_the_order_given_and_a_failure_is_its_own():
    def fn(host):
        if host == "bad":
            raise OSError("no route")
        time.sleep(0.01 * (5 - int(host)))
        return host * 2

    out = fanout.each_host(["1", "bad", "3", "4"], fn)
    assert [h for h, _ in out] == ["1", "bad", "3", "4"]
    assert [v for h, v in out if h != "bad"] == ["11", "33", "44"] and isinstance(dict(out)["bad"], OSError)


def test_no_more_hosts_are_asked_at_once_than_allowed():
    busy, most, lock = [0], [0], threading.Lock()

    def fn(host):
        with lock:
            busy[0] += 1
            most[0] = max(most[0], busy[0])
        time.sleep(0.02)
        with lock:
            busy[0] -= 1

    fanout.each_host([str(i) for i in range(20)], fn, max_workers=3)
    assert most[0] == 3


def test_a_ctrl_c_ends_the_process_while_hosts_are_still_being_asked():
    """A thread pool joined its workers at exit: an interrupted fleet waited on every handshake."""
    code = ("import sys, time\nfrom gpuops.remote import fanout\nprint('asking', flush=True)\n"
            "fanout.each_host(['a', 'b'], lambda h: time.sleep(60))\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "asking\n"
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("the process waited for its hosts after a Ctrl-C")
    assert "KeyboardInterrupt" in p.stderr.read()
