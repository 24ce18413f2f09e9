"""Whether a checkpoint written in place has finished, beyond its size standing still: nobody holds
it open for writing, and its format's own end is there. gpuops.onbox.run.checkpoints asks these at
each look of the checkpoint directory.

  * Open for writing: a process whose /proc/PID/fd has a descriptor on a path inside the entry,
    opened write-only or read-write (the access mode in /proc/PID/fdinfo/FD's `flags`). Every
    process this user can read is looked at, the run's among them; a save in progress by any of
    them is a save in progress. Past MAX_FDS descriptors nothing is claimed either way.
  * The format's end, where a cheap look finds it:
      zip (torch.save since 1.6, so .pt/.pth/.bin/.ckpt): the end of central directory record
          (PK\\x05\\x06) closes the file, comment included. torch's PyTorchStreamWriter (caffe2/
          serialize/inline_container.cc, over miniz) writes it last, after every record, so a
          file cut mid-write has none.
      safetensors: 8 bytes little-endian header length N (at most 100,000,000: safetensors/src/
          tensor.rs, MAX_HEADER_SIZE), N bytes of JSON, then the tensors' bytes up to the largest
          data_offsets end; the file is exactly that long.
    Other formats (legacy pickles, .distcp shards) have no such check: their writer's marker file
    and the stability checks are what there is.
  * The best checkpoint, where the writer records it:
      HF Trainer: trainer_state.json's best_model_checkpoint (TrainerState.save_to_json writes
          sort_keys=True, so it sits near the top; only the head is read).
      Lightning: each .ckpt holds ModelCheckpoint's state_dict() under checkpoint["callbacks"]
          (lightning/pytorch/callbacks/model_checkpoint.py, state_dict: "best_model_path" ...;
          trainer/connectors/checkpoint_connector.py, dump_checkpoint), pickled by torch.save into
          the zip's data.pkl. The pickle is read as opcodes (pickletools.genops), never loaded:
          the string after the key best_model_path is the path.
"""

import json
import os
import pickletools
import re
import struct
import zipfile

MAX_PROCS = 4096
MAX_FDS = 65536
ZIP_TAIL = 22 + 65535          # the end record and the longest comment it may carry
SAFETENSORS_HEADER_MAX = 100000000
HEADER_READ_MAX = 16 << 20     # a larger safetensors header is not parsed (its length is still checked)
STATE_HEAD = 64 << 10
PICKLE_MAX = 16 << 20          # a Lightning data.pkl larger than this is not read for its best path
_STRINGS = ("BINUNICODE", "SHORT_BINUNICODE", "UNICODE", "BINUNICODE8")
CHECKED_EXT = (".pt", ".pth", ".bin", ".ckpt", ".safetensors", ".tar")
_BEST = re.compile(rb'"best_model_checkpoint"\s*:\s*"((?:[^"\\]|\\.){1,4096})"')


def writers(directory: str, proc: str = "/proc"):
    """{top-level name in `directory`: pid} of entries some process holds open for writing; None
    when /proc could not be read through."""
    prefix = directory.rstrip("/") + "/"
    out, fds = {}, 0
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()][:MAX_PROCS]
    except OSError:
        return None
    for pid in pids:
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue  # another user's, or gone
        fds += len(names)
        if fds > MAX_FDS:
            return None
        for fd in names:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if not target.startswith(prefix) or not _writable(os.path.join(proc, pid, "fdinfo", fd)):
                continue
            out.setdefault(target[len(prefix):].split("/", 1)[0], int(pid))
    return out


def _writable(fdinfo: str) -> bool:
    try:
        with open(fdinfo) as f:
            for line in f:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & 3 in (1, 2)
    except (OSError, ValueError, IndexError):
        pass
    return True  # unreadable: taken as a writer, so nothing is judged finished on a guess


def broken(path: str):
    """Why a file's own format says it was cut short, or None (fine, or no check for it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            size = os.fstat(f.fileno()).st_size
            if path.endswith(".safetensors"):
                return _safetensors(f, head, size)
            if head[:4] == b"PK\x03\x04":
                f.seek(max(0, size - ZIP_TAIL))
                return _zip_end(f.read())
    except OSError as e:
        return "unreadable (%s)" % (e.strerror or e)
    return None


def _zip_end(tail: bytes):
    at = tail.rfind(b"PK\x05\x06")
    while at >= 0:
        if at + 22 <= len(tail) and at + 22 + struct.unpack("<H", tail[at + 20:at + 22])[0] == len(tail):
            return None
        at = tail.rfind(b"PK\x05\x06", 0, at)
    return "a zip (torch.save) without its end record: cut mid-write"


def _safetensors(f, head: bytes, size: int):
    if len(head) < 8:
        return "a safetensors file shorter than its header length"
    n = struct.unpack("<Q", head)[0]
    if not 0 < n <= SAFETENSORS_HEADER_MAX or 8 + n > size:
        return "a safetensors header length (%d) the file cannot hold: cut mid-write" % n
    if n > HEADER_READ_MAX:
        return None
    try:
        header = json.loads(f.read(n).decode("utf-8"))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return "a safetensors header that does not parse: cut mid-write"
    want = 8 + n + max(ends or [0])
    if size != want:
        return "a safetensors file of %d bytes where its header says %d: cut mid-write" % (size, want)
    return None


def first_broken(path: str, is_dir: bool, most: int = 64):
    """Why the entry at `path` is cut short: itself, or for a directory the first of its files
    with a checked format (at most `most` of them looked at); None when none is."""
    if not is_dir:
        return broken(path)
    looked = 0
    for root, _dirs, files in os.walk(path, followlinks=False):
        for name in sorted(files):
            if not name.endswith(CHECKED_EXT):
                continue
            looked += 1
            if looked > most:
                return None
            why = broken(os.path.join(root, name))
            if why:
                return "%s: %s" % (os.path.relpath(os.path.join(root, name), path), why)
    return None


def hf_best(checkpoint_dir: str):
    """The base name of the best checkpoint a trainer_state.json in `checkpoint_dir` names, or None."""
    try:
        with open(os.path.join(checkpoint_dir, "trainer_state.json"), "rb") as f:
            m = _BEST.search(f.read(STATE_HEAD))
    except OSError:
        return None
    if not m:
        return None
    try:
        path = json.loads(b'"' + m.group(1) + b'"')
    except ValueError:
        return None
    return os.path.basename(path.rstrip("/")) or None


def lightning_best(ckpt: str):
    """The base name of the best checkpoint a Lightning .ckpt's ModelCheckpoint state names, or None."""
    try:
        with zipfile.ZipFile(ckpt) as z:
            pkl = next((i for i in z.infolist() if i.filename.endswith("data.pkl")), None)
            if pkl is None or pkl.file_size > PICKLE_MAX:
                return None
            data = z.read(pkl)
    except (OSError, zipfile.BadZipFile, RuntimeError, NotImplementedError, EOFError):
        return None
    memo, last, wanted = {}, None, False
    try:
        for op, arg, _pos in pickletools.genops(data):
            if op.name in _STRINGS:
                value = arg
            elif op.name in ("BINGET", "LONG_BINGET", "GET"):
                value = memo.get(arg)
            elif op.name in ("BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"):
                memo[len(memo) if op.name == "MEMOIZE" else arg] = last
                continue
            else:
                value = None
            if wanted:  # the value pushed right after the key (None: no best yet)
                return os.path.basename(value.rstrip("/")) or None if isinstance(value, str) else None
            wanted, last = value == "best_model_path", value
    except (ValueError, KeyError, IndexError, struct.error):
        return None
    return None
