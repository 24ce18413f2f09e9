"""The batch script sbatch runs for a gpuops job (pure: a spec in, the script's text out).

The job's command stays in its immutable `cmd` file next to the script; the script sets the
job's environment (never a secret: those reach the job through sbatch's environment), sources
the platform's hook, and runs the command in its own process group while the script waits.
Waiting rather than exec'ing is what makes checkpoint signals work: `scancel --batch --signal`
and `sbatch --signal=B:SIG@T` reach only this shell, which hands the signal to the whole command
group. The command runs in a subshell that ignores nothing but survives that signal (a trap, not
an ignore, so the programs it starts get the default back and can install their own handler);
a `#!` script is exec'd by it and gets the signal itself.

With torchrun, the script also finds the rendezvous endpoint on the allocation's first node
(where a batch script runs): that node's name, and the asked port when it is free there, else
one the kernel says is free. Both are exported for the command (GPUOPS_RDZV_HOST/PORT).
"""

import shlex

_FREE_PORT = ("import socket,sys\n"
              "def free(p):\n"
              "    s=socket.socket()\n"
              "    try:\n"
              "        s.bind(('',p)); return s.getsockname()[1]\n"
              "    except OSError:\n"
              "        return None\n"
              "    finally:\n"
              "        s.close()\n"
              "p=int(sys.argv[1]); q=free(p) or free(0)\n"
              "if q!=p: sys.stderr.write('gpuops: rendezvous port %d is taken on this node; using %d\\n' % (p,q))\n"
              "print(q)\n")


def _resume(spec) -> list:
    """A run policy's side (gpuops.onbox.engines.slurm_resume): at each start resume.py records it and,
    once Slurm requeued the job, says whether it may run again and from which checkpoint, and
    writes the resumed command. Its own exit code ends a job it refuses to run again."""
    q = shlex.quote
    here = q(spec["job_dir"])
    return [
        "cmdfile=%s/cmd extra=()" % here,
        'GPUOPS_RESUME_FROM=$(python3 -S %s/resume.py "${SLURM_RESTART_COUNT:-0}") || exit $?' % here,
        '[ -n "$GPUOPS_RESUME_FROM" ] && export GPUOPS_RESUME_FROM',
        "[ -e %s/resume.sh ] && cmdfile=%s/resume.sh" % (here, here),
        "[ -e %s/resume.args ] && mapfile -d '' extra < %s/resume.args" % (here, here),
    ]


def render(spec):
    """The script for `spec`: job_id, job_dir, kind ('cmd' or 'script'), args, env {name: value},
    pre (a hook line or None), signal (the checkpoint signal's name, e.g. 'USR1'), rdzv_port
    (torchrun jobs: the port to try first), resume (a run policy: see _resume) and watch (with
    resume: the command runs under watch.py, gpuops.onbox.engines.slurm_watch, which the shell's signals
    reach as they reach the command without it)."""
    q = shlex.quote
    sig = (spec.get("signal") or "USR1").upper().replace("SIG", "", 1)
    lines = [
        "#!/bin/bash",
        "# gpuops job %s, submitted by `gpuops launch --engine slurm`. The command is ./cmd." % spec["job_id"],
        "# Secrets are not in this file: they come with the job's environment.",
        "export GPUOPS_JOB_ID=%s GPUOPS_JOB_DIR=%s PYTHONUNBUFFERED=1" % (q(spec["job_id"]), q(spec["job_dir"])),
    ]
    for name, value in sorted((spec.get("env") or {}).items()):
        lines.append("export %s=%s" % (name, q(value)))
    if spec.get("pre"):
        lines.append("{ %s\n} >/dev/null 2>&1 || true" % spec["pre"])
    if spec.get("rdzv_port"):
        lines += [
            'GPUOPS_RDZV_HOST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "GPUOPS_RDZV_PORT=$(python3 -c %s %d)" % (q(_FREE_PORT), int(spec["rdzv_port"])),
            "export GPUOPS_RDZV_HOST GPUOPS_RDZV_PORT",
        ]
    cmd = q(spec["job_dir"] + "/cmd")
    if spec.get("kind") == "script":
        run = "exec %s%s" % (cmd, "".join(" " + q(a) for a in spec.get("args") or []))
    else:
        run = ". %s" % cmd
    if spec.get("resume"):
        lines += _resume(spec)
        run = 'exec %s%s "${extra[@]}"' % (cmd, "".join(" " + q(a) for a in spec.get("args") or [])) \
            if spec.get("kind") == "script" else '. "$cmdfile"'
        if spec.get("watch"):
            run = 'exec python3 -S %s/watch.py "$cmdfile" "${extra[@]}"' % q(spec["job_dir"])
    lines += [
        "set -m",
        "( trap : %s; %s ) &" % (sig, run),
        "child=$!",
        "trap 'kill -s %s -- -$child 2>/dev/null' %s" % (sig, sig),
        "while :; do",
        '  wait "$child"; rc=$?',
        '  kill -0 "$child" 2>/dev/null || break',
        "done",
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"
