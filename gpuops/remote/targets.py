"""Which target a host spec gets: this machine, the OpenSSH client, or paramiko."""

from . import hostspec, openssh, warmup
from .local import LocalTarget


def target_for(spec: str, identity=None):
    """The target for a host spec. GPUOPS_TRANSPORT=paramiko|openssh overrides the choice."""
    if hostspec.is_local(spec):
        return LocalTarget()
    warmed = warmup.take(spec, identity)
    if warmed is not None:
        return warmed
    resolved = hostspec.resolve(spec, identity)
    if openssh.chosen() == "openssh":
        return openssh.OpenSSHTarget(resolved, identity)
    from .paramiko_ssh import SSHTarget  # loaded only where the OpenSSH client is not used

    return SSHTarget(resolved)
