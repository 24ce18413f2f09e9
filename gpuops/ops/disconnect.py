"""`disconnect`: end the SSH master connections gpuops keeps between calls (gpuops.remote.mux)."""

from .. import errors
from ..envelope import envelope
from ..remote import hostspec, mux
from typing import Optional


def disconnect(host: Optional[str]=None, identity=None):
    directory = mux.shared_dir()
    if directory is None:
        return envelope("disconnect", ok=True, summary="no shared SSH masters here (none are kept)",
                        data={"closed": [], "directory": None})
    if host:
        wanted = []
        for spec in hostspec.split_hosts(host):
            if hostspec.is_local(spec):
                raise errors.UsageError("--host local has no SSH connection to close")
            path = mux.socket_path(directory, hostspec.resolve(spec, identity), identity)
            if path:
                wanted.append((spec, path))
    else:
        wanted = [(None, path) for path in mux.sockets(directory)]
    closed = [spec or path.rsplit("/", 1)[-1] for spec, path in wanted if mux.close(path)]
    what = f"{len(closed)} master connection(s)" if closed else "no open master connection"
    return envelope("disconnect", ok=True, summary=f"closed {what}" + (f": {', '.join(closed)}" if closed else ""),
                    data={"closed": closed, "directory": directory})
