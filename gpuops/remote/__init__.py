"""Transport: host specs, host-key policy, sh wrapping with remote deadlines, targets, fan-out.

    base        Target: how a command runs and its answer comes back (subclasses only spawn/close)
    local       this machine           openssh   the ssh client (and the one ssh command line)
    paramiko_ssh  paramiko/Fabric      targets   target_for(spec): which one a host gets
    hostspec    host specs resolved like OpenSSH      hostkeys  trust on first use for paramiko
    wrap        quoting, sh -c, timeout -k, the shipped-script bootstrap
    warmup      start the handshake while the program is still starting
    fanout      one operation on many hosts, one outcome each

Nothing is imported here: `gpuops ... --host H` starts `ssh -G` for H (gpuops.remote.hostspec)
before the transport's modules load, so importing this package must not load them.
"""
