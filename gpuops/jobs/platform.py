"""What a platform profile changes about a launch (pure: profile in, launch settings out).

The job directory moves to the profile's job_root, HF_HOME points at its big-cache disk, the
profile's fixed environment is added, and its proxy hook (e.g. AutoDL's network_turbo) is sourced
before the command. Anything the user passed explicitly wins. A platform whose jobs go through
an engine (a detach an engine names, such as Slurm's "sbatch": gpuops.engines.for_profile)
submits them there, with the site's defaults that engine reads; one whose jobs must be a
scheduler's that no engine runs (Kubernetes Jobs) is refused: a process started inside a pod's
shell is not a job there, and it dies or is killed without a record.
"""

from ..errors import Refused


def settings(profile, *, jobs_dir=None, env=None):
    """(jobs_dir, env, pre_hook, notes) for a launch under `profile`."""
    from .. import engines
    from ..profiles import SCHEDULER_DETACH  # loaded already: `profile` is one

    if profile.launch.detach in SCHEDULER_DETACH and not engines.runs_detach(profile.launch.detach):
        raise Refused(f"profile {profile.name} runs work through {profile.launch.detach}: submit it there; "
                      f"gpuops launch would start an untracked process on this node")
    env = dict(env or {})
    notes = []
    for name, value in dict(profile.launch.env).items():
        env.setdefault(name, value)
    hf = profile.paths.hf_home
    if hf and "HF_HOME" not in env:
        if "<" in hf:
            notes.append(f"HF_HOME not set: the profile's {hf!r} has a placeholder; pass --env HF_HOME=...")
        else:
            env["HF_HOME"] = hf
    root, note = records_dir(profile, jobs_dir)
    notes += [note] if note else []
    return root, env, (profile.launch.proxy_hook or None), notes


def records_dir(profile, jobs_dir=None):
    """(jobs dir, note): an explicit --jobs-dir, else the profile's job_root, else None (the box's
    default); the note says why a profile's directory was not used."""
    if jobs_dir or profile is None:
        return jobs_dir, None
    root = profile.paths.job_root or None
    if root and "<" in root:
        return None, f"job directory left at the default: the profile's {root!r} has a placeholder"
    return root, None
