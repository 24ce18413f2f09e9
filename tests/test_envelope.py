"""The envelope's error keys (schema version 3): whether to retry, after how long, and the fix as a
step, for errors that used to leave a caller with prose only."""

from gpuops import errors
from gpuops.envelope import SCHEMA_VERSION, again, envelope, error_envelope


def test_an_error_says_whether_and_when_to_retry():
    assert SCHEMA_VERSION == 3
    gone = error_envelope("status", errors.Unreachable("box: connection refused"), host="box")
    assert gone["error"] == {"kind": "unreachable", "message": "box: connection refused", "retryable": True,
                             "retry_after_s": 15.0}
    busy = error_envelope("push", errors.Busy("/d is being written by another transfer"))
    assert busy["error"]["retryable"] is True and busy["error"]["retry_after_s"] == 30.0
    assert errors.code_for_kind("busy") == errors.REFUSED  # still exit 5
    wrong = error_envelope("status", errors.UsageError("--limit takes a whole number"))
    assert wrong["error"]["retryable"] is False and "retry_after_s" not in wrong["error"]
    # an operation's own error document (status keeps what it last saw of an unreachable job) too
    built = envelope("status", ok=False, summary="s", error={"kind": "timed-out", "message": "m"})
    assert built["error"]["retryable"] is True and built["error"]["retry_after_s"] == 15.0


def test_a_changed_host_key_has_its_fix_as_a_step():
    """The fix was a sentence inside the message; an agent had nothing to run."""
    message = ("box: host key changed: the server offered SHA256:abc, known_hosts expects SHA256:def. If the box was "
               "re-provisioned, remove the old entry with: ssh-keygen -R '[127.0.0.1]:2222' -f /home/u/.ssh/known_hosts")
    doc = error_envelope("preflight", errors.HostKeyChanged(message), host="box")
    (fix,) = doc["next"]
    assert fix["argv"] == ["ssh-keygen", "-R", "[127.0.0.1]:2222", "-f", "/home/u/.ssh/known_hosts"]
    assert "re-provisioned" in fix["why"] and doc["error"]["retryable"] is False


def test_a_retryable_error_gets_the_same_command_again_unless_it_has_a_step():
    gone = error_envelope("status", errors.Unreachable("box: connection refused"), host="box")
    made = again(gone, ["gpuops", "status", "--host", "box", "--json"])
    assert made["next"] == [{"argv": ["gpuops", "status", "--host", "box", "--json"],
                             "why": "the same, in about 15s"}]
    assert again(error_envelope("status", errors.NotFound("no job")), ["gpuops", "status"])["next"] == []
    assert again(made, ["gpuops", "other"])["next"] == made["next"]
