"""What a copy's summary counts: what crossed the link in the verb's direction, and what the
destination already held, complete files as files and a resume's partial bytes as bytes."""

from gpuops.onbox.sync.manifest import Entry
from gpuops.ops.sync import moved_and_kept
from gpuops.sync.outcome import Outcome
from gpuops.sync.plan import Plan

MIB = 1 << 20


def _tree():
    sizes = {"new.bin": 20 * MIB, "half.bin": 8 * MIB, **{f"done/{i}.bin": 14 * MIB for i in range(20)}}
    return {rel: Entry(rel, "f", size, None, None) for rel, size in sizes.items()}


def test_a_resumed_copy_counts_the_complete_files_already_there_and_the_partial_bytes_apart():
    """A resumed push said '15.9 MiB were already on the box' when 280 MiB of complete files were."""
    src = _tree()
    p = Plan(send=["new.bin", "half.bin"], equal=[f"done/{i}.bin" for i in range(20)])
    said = moved_and_kept("push", src, p, Outcome("rsync", bytes_sent=12 * MIB, bytes_reused=int(15.9 * MIB)))
    assert said == "sent 2 files, 12.0 MiB; 20 files, 280.0 MiB were already on the box, and 15.9 MiB of partial files resumed"


def test_a_pull_says_received_and_here():
    """A pull said it 'sent 214 path(s)'."""
    src = _tree()
    said = moved_and_kept("pull", src, Plan(send=list(src)), Outcome("rsync", bytes_sent=308 * MIB))
    assert said == "received 22 files, 308.0 MiB"
