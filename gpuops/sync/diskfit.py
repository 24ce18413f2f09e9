"""Does the payload fit? Bytes AND inodes, against the destination's free space, with a margin.

Disks on rented boxes die on inodes as often as on bytes (U7), and a full disk mid-copy leaves a
box in a worse state than no copy at all (U6), so the check runs before anything is sent. Each
file is counted in whole filesystem blocks, since ten thousand 100-byte files occupy 40 MB, not
1 MB. A file that replaces an existing one still needs its full size: the new copy is written
beside the old one and renamed over it.
"""

from ..units import human_bytes

BLOCK = 4096
MARGIN_BYTES = 1 << 20
MARGIN_INODES = 16
MARGIN_FRACTION = 0.02


def blocks(size: int, block: int = BLOCK) -> int:
    return -(-size // block) * block if size else 0


def need(src: dict, dst: dict, send, root_exists=True) -> dict:
    """Bytes and inodes the destination must provide to receive `send` (rels into `src`)."""
    nbytes = 0
    inodes = 0 if root_exists else 1
    for rel in send:
        e = src[rel]
        if e.kind == "f":
            nbytes += blocks(e.size)
        elif e.kind == "d":
            nbytes += BLOCK
        if rel not in dst:
            inodes += 1
    if send:
        inodes += 2  # the partial directory and one in-flight temporary file
    return {"bytes": nbytes, "inodes": inodes}


def check(needed: dict, space: dict) -> dict:
    """{'fits', 'need_bytes', 'need_inodes', 'margin_bytes', 'margin_inodes', 'free_bytes',
    'free_inodes', 'at'}; an unknown free-inode count (f_files == 0) does not refuse."""
    margin_b = MARGIN_BYTES + int(needed["bytes"] * MARGIN_FRACTION)
    margin_i = MARGIN_INODES + int(needed["inodes"] * MARGIN_FRACTION)
    free_b = space.get("free_bytes")
    free_i = space.get("free_inodes")
    inodes_known = bool(space.get("total_inodes"))
    fits_b = not needed["bytes"] or free_b is None or needed["bytes"] + margin_b <= free_b
    fits_i = not needed["inodes"] or not inodes_known or free_i is None or needed["inodes"] + margin_i <= free_i
    return {
        "fits": bool(fits_b and fits_i),
        "short_of": [w for w, ok in (("bytes", fits_b), ("inodes", fits_i)) if not ok],
        "need_bytes": needed["bytes"], "need_inodes": needed["inodes"],
        "margin_bytes": margin_b, "margin_inodes": margin_i,
        "free_bytes": free_b, "free_inodes": free_i if inodes_known else None,
        "at": space.get("measured_at") or space.get("path"),
    }


def refusal(verdict: dict, where: str) -> str:
    """One line with the numbers: what is needed, what is free, what to do."""
    return (f"does not fit: {where} needs {human_bytes(verdict['need_bytes'])} ({verdict['need_bytes']} B) and "
            f"{verdict['need_inodes']} inodes plus a margin of {human_bytes(verdict['margin_bytes'])} and "
            f"{verdict['margin_inodes']} inodes, but {verdict['at']} has {human_bytes(verdict['free_bytes'])} "
            f"({verdict['free_bytes']} B) and {verdict['free_inodes'] if verdict['free_inodes'] is not None else 'unlimited'} "
            f"inodes free (short of {' and '.join(verdict['short_of'])}); refused before sending anything "
            f"(exit 5): free space there, pick another --dst, or pass --no-budget to try anyway")


# Many small files cost per-file round trips and inodes on both ends, whatever their bytes (U25).
SMALL_FILES_MIN = 10_000
SMALL_FILE_MEDIAN = 64 << 10


def small_files(src: dict, send) -> dict | None:
    """Evidence that `send` is a payload of many small files, or None."""
    sizes = sorted(src[r].size for r in send if src[r].kind == "f")
    if len(sizes) < SMALL_FILES_MIN:
        return None
    median = sizes[len(sizes) // 2]
    if median >= SMALL_FILE_MEDIAN:
        return None
    return {"files": len(sizes), "median_size": human_bytes(median), "total": human_bytes(sum(sizes))}
