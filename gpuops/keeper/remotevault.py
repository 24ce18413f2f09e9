"""A vault on another machine (`--vault HOST:DIR`): the layout of gpuops.keeper.vault, on an
always-on host reached over SSH, with the same guarantees.

A checkpoint goes box -> here -> vault host: a verified pull into a staging place of the run here
(the keeper's state dir), a verified push into HOST:DIR/RUN/.incoming/NAME~TOKEN, its manifest
written beside that, then on the host the manifest and then the directory renamed into checkpoints/
(held only when both are there, as in a local vault). Back to a new box it comes by a verified pull
from the host whose hashes must equal the held manifest, then the usual verified push. A checkpoint
that is one file travels as a local vault's does (gpuops.keeper.vault.only): inside a directory of
its own up to the host, where its manifest and then the file alone are renamed into checkpoints/.

Every path sent to the host's shell is built from the vault's absolute DIR, the run id and plain
names (gpuops.keeper.vault.plain), each quoted; what the host answers is bounded and checked.
A host that cannot be reached (or an SSH error of any kind) is a VaultError, not a HostError: the
run's box is not to blame.
"""

import json
import os
import secrets

from .. import contained, errors
from ..ops import pull, push
from ..ops import sync as S
from ..pullindex import manifest_for
from ..remote.result import Result
from ..remote.targets import target_for
from ..remote.wrap import quote
from . import record, vault
from .vault import CHECKPOINTS, INCOMING, TOKEN

CALL_S = 60.0
COPY_RETRY_S = 30.0
LISTING_BYTES = 16 << 20  # what held() reads back at most: manifests of the checkpoints kept
STAGING = "vault-staging"
MANIFEST = ".gpuops-manifest.json"


class VaultError(errors.Refused):
    """The vault host could not be reached or refused an operation."""


def vault_of(spec: dict, run_id: str) -> "vault.Vault | RemoteVault":
    """The run's vault: a Vault here, or a RemoteVault when the spec names a vault host."""
    if spec.get("vault_host"):
        return RemoteVault(spec["vault_host"], spec["vault"], run_id)
    return vault.Vault(spec["vault"], run_id)


def _manifest_name(name: str) -> str:
    return f".{name}{MANIFEST}"


class RemoteVault:
    def __init__(self, host: str, base: str, run_id: str) -> None:
        if not vault.plain(run_id):
            raise errors.UsageError(f"a run id is one plain name, not {run_id!r}")
        self.host, self.base, self.run_id = host, base, run_id
        self.dir = f"{base.rstrip('/') or ''}/{run_id}"
        self.root = f"{host}:{self.dir}"  # how it is shown (and given to a stop command as GPUOPS_VAULT)
        self.staging = os.path.join(record.run_dir(run_id), STAGING)

    def make(self) -> "RemoteVault":
        """The vault's directories on the host, its DIR made absolute (a relative one is under the
        home directory); the vault itself, now naming the absolute DIR."""
        subs = " ".join(quote(f"{self.run_id}/{s}") for s in (CHECKPOINTS, INCOMING, vault.BOXES, vault.OUTPUTS))
        out = self._sh(f"mkdir -p -- {quote(self.base)} && cd -- {quote(self.base)} && umask 077 && "
                       f"mkdir -p -- {subs} && pwd -P").text.strip()
        if not out.startswith("/") or "\n" in out or any(ord(c) < 32 for c in out):
            raise VaultError(f"vault host {self.host}: named no absolute directory for {self.base!r}")
        return RemoteVault(self.host, out, self.run_id)

    def path(self, *parts) -> str:
        return "/".join((self.dir,) + parts)

    def held(self) -> list:
        """[{name, files, bytes, verified_at, arrived}] of the complete checkpoints on the host."""
        script = (f"cd -- {quote(self.path(CHECKPOINTS))} || exit 1\n"
                  f"for d in *; do m=\".$d{MANIFEST}\"; [ -f \"$m\" ] && [ ! -L \"$d\" ] || continue\n"
                  "if [ -d \"$d\" ]; then k=dir; elif [ -f \"$d\" ]; then k=file; else continue; fi\n"
                  "printf '%s\\0%s\\0%s\\0' \"$d\" \"$(stat -c %Y -- \"$m\")\" \"$k\"; cat -- \"$m\"; printf '\\0'; done")
        parts = self._sh(script, max_bytes=LISTING_BYTES).stdout.split(b"\0")
        out = []
        for i in range(0, len(parts) - 3, 4):
            name, arrived, doc = parts[i].decode("utf-8", "replace"), parts[i + 1], _doc(parts[i + 3])
            if vault.plain(name) and arrived.isdigit() and doc is not None and \
                    parts[i + 2].decode("ascii", "replace") == vault.kind_of(doc):
                out.append({"name": name, "files": len(doc["files"]), "bytes": sum(f["size"] for f in doc["files"]),
                            "verified_at": doc.get("verified_at"), "arrived": int(arrived)})
        out.sort(key=lambda h: (h["arrived"], h["name"]))
        return out

    def incoming(self, name: str) -> str:
        """A fresh place here to pull checkpoint `name` into, on its way to the host."""
        _check(name)
        os.makedirs(self.staging, mode=0o700, exist_ok=True)
        self.clear(name)
        return os.path.join(self.staging, f"{name}{TOKEN}{secrets.token_hex(4)}")

    def clear(self, name: str) -> None:
        """What copies of checkpoint `name` left in the staging place here removed (as Vault.clear)."""
        for left in os.listdir(self.staging):
            if left.split(TOKEN, 1)[0] in (name, f".{name}"):
                contained.Root(self.staging).remove(left)

    def claim(self, name: str, src, kind: str = "dir") -> None:
        """Checkpoint `name`, verified at `src` (from incoming()) by its pull, pushed (verified) to the
        host under a temporary name, then held there: its manifest renamed in first, its directory (or,
        of a `kind` "file" checkpoint, the file alone) last."""
        _check(name)
        local = vault.valid_manifest(_read_json(manifest_for(src))) if os.path.dirname(src) == self.staging else None
        if kind == vault.FILE:
            local = vault.file_manifest(local, name) if os.path.isfile(os.path.join(src, name)) else None
        if local is None:
            raise VaultError(f"vault: {name} has no verified manifest; not claimed")
        temp = os.path.basename(src)
        inc = self.path(INCOMING)
        self._sh(f"cd -- {quote(inc)} && rm -rf -- {quote(name)}{TOKEN}* {quote('.' + name)}{TOKEN}*")
        doc = self._copy(push.push, src, f"{inc}/{temp}")
        if not doc["ok"]:
            raise VaultError(f"vault host {self.host}: copying {name} failed: {doc['summary']}")
        self._sh(f"cat > {quote(inc + '/' + _manifest_name(temp))}", stdin=json.dumps(local).encode("ascii"))
        ck = self.path(CHECKPOINTS)
        moved = f"{inc}/{temp}/{name}" if kind == vault.FILE else f"{inc}/{temp}"
        self._sh(f"cd -- {quote(ck)} && rm -f -- {quote(_manifest_name(name))} && rm -rf -- {quote(name)} && "
                 f"mv -T -- {quote(inc + '/' + _manifest_name(temp))} {quote(_manifest_name(name))} && "
                 f"mv -T -- {quote(moved)} {quote(name)} && rm -rf -- {quote(inc + '/' + temp)}")
        self.clear(name)

    def drop(self, name: str) -> None:
        """Stop holding checkpoint `name`: its manifest goes first, so it is never half held."""
        _check(name)
        self._sh(f"cd -- {quote(self.path(CHECKPOINTS))} && rm -f -- {quote(_manifest_name(name))} && "
                 f"rm -rf -- {quote(name)}")

    def checkout(self, name: str) -> str:
        """Checkpoint `name` here, pulled (verified) from the host; Refused unless the pull's hashes are
        the held manifest's."""
        _check(name)
        held = _doc(self._sh(f"cat -- {quote(self.path(CHECKPOINTS, _manifest_name(name)))}",
                             max_bytes=LISTING_BYTES).stdout)
        one = held is not None and vault.kind_of(held) == vault.FILE
        where = self.incoming(name)
        doc = self._copy(pull.pull, self.path(CHECKPOINTS, *(() if one else (name,))), where,
                         vault.only(name) if one else ())
        got = vault.valid_manifest(_read_json(manifest_for(where))) if doc["ok"] else None
        if held is None or got is None or _files(held) != _files(got):
            raise VaultError(f"vault checkpoint {name} on {self.host} does not match its manifest"
                             f"{'' if doc['ok'] else ': ' + doc['summary']}; not pushed")
        return os.path.join(where, name) if one else where

    def checked_in(self, name: str) -> None:
        """checkout()'s copy here is removed."""
        if os.path.isdir(self.staging):
            self.clear(name)

    def landing(self, *parts) -> str:
        """Where a pull of the vault's `parts` lands here before land() sends it to the host (kept,
        so the next pull and push of a growing log copy only what changed)."""
        for p in parts:
            _check(p)
        return os.path.join(self.staging, "files", *parts)

    def land(self, local: str, *parts: str) -> str | None:
        """What landing() received, pushed (verified) to the vault's `parts` on the host; None, or why not."""
        try:
            doc = self._copy(push.push, local, self.path(*parts))
        except VaultError as e:
            return e.message
        return None if doc["ok"] else doc["summary"]

    def _copy(self, verb, src: str, dst: str, excludes: tuple = ()) -> dict:
        target = self._target()
        try:
            return verb(target, src, dst, S.Options(excludes=excludes, retry_for=COPY_RETRY_S))
        except errors.GpuopsError as e:
            raise VaultError(f"vault host {self.host}: {e.message}") from None
        finally:
            target.close()

    def _target(self):
        try:
            return target_for(self.host)
        except errors.GpuopsError as e:
            raise VaultError(f"vault host {self.host}: {e.message}") from None

    def _sh(self, line: str, stdin: bytes = b"", max_bytes: int | None = None) -> Result:
        target = self._target()
        try:
            result = target.run(line, stdin=stdin, timeout_s=CALL_S, **({"max_bytes": max_bytes} if max_bytes else {}))
        except errors.GpuopsError as e:
            raise VaultError(f"vault host {self.host}: {e.message}") from None
        finally:
            target.close()
        if result.exit != 0:
            raise VaultError(f"vault host {self.host}: {(result.err_text.strip() or f'exit {result.exit}')[:300]}")
        return result


def _check(name) -> None:
    if not vault.plain(name):
        raise VaultError(f"vault: {name!r} is not a plain name; not copied")


def _files(doc) -> set:
    return {(f["path"], f["size"], f["sha256"]) for f in doc["files"]}


def _doc(raw: bytes) -> dict | None:
    try:
        return vault.valid_manifest(json.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError):
        return None


def _read_json(path: str) -> object:
    try:
        with open(path, encoding="ascii") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
