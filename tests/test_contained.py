"""gpuops.contained: a write under a root never leaves it, whatever the name and whatever symlinks
the tree holds or gains meanwhile; a link in the way of a directory is replaced, never followed."""

import errno
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuops import contained
from tests.sync.conftest import snapshot


@pytest.mark.parametrize("rel", ["", "/etc/passwd", "..", "../x", "a/../b", "a/..", "a//b", "a/", "./a", "a/.",
                                 "a\0b", "\udc2f", 7, None, ["a"]])
def test_a_name_that_cannot_stay_inside_is_refused(rel, tmp_path):
    assert contained.problem(rel) is not None
    with pytest.raises(contained.Outside):
        contained.Root(tmp_path).makedirs(rel)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("rel", ["a", "a/b/c", "..hidden", ".x", "ünï ✓", "caf\udce9", "a b/$(x)"])
def test_any_real_name_is_a_path_inside(rel, tmp_path):
    assert contained.problem(rel) is None
    contained.Root(tmp_path).makedirs(rel)
    assert os.path.isdir(os.path.join(os.fsencode(tmp_path), rel.encode("utf-8", "surrogateescape")))


@pytest.fixture
def world(tmp_path):
    """A root holding a link to a directory outside it (`out`), and that directory."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "keep").write_text("precious\n")
    (root / "out").symlink_to(outside)
    return contained.Root(root), root, outside


def test_a_symlink_where_a_directory_is_needed_is_replaced_not_followed(world):
    inside, root, outside = world
    inside.makedirs("out/deeper")
    assert not (root / "out").is_symlink() and (root / "out" / "deeper").is_dir()
    assert sorted(os.listdir(outside)) == ["keep"]


def test_a_file_where_a_directory_is_needed_is_an_error_not_replaced(world):
    inside, root, _ = world
    (root / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="file is in the way"):
        inside.makedirs("file/sub")
    assert (root / "file").read_text() == "x"


def test_symlinks_are_written_as_given_replacing_a_file_or_link_never_a_directory(world):
    inside, root, outside = world
    inside.symlink(b"/anywhere", "out")
    assert os.readlink(root / "out") == "/anywhere" and (outside / "keep").exists()
    (root / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        inside.symlink(b"x", "d")


def test_remove_takes_the_link_itself_and_never_reaches_through_one(world):
    inside, root, outside = world
    (root / "tree" / "deep").mkdir(parents=True)
    (root / "tree" / "deep" / "f").write_text("f")
    (root / "tree" / "back-out").symlink_to(outside)
    inside.remove("out/keep")  # the way in is a link: nothing of the root is there
    inside.remove("tree")
    inside.remove("out")
    inside.remove("never/was")
    assert os.listdir(root) == [] and (outside / "keep").read_text() == "precious\n"


def test_open_never_follows_the_last_name_when_it_is_a_link(world):
    inside, _, outside = world
    with inside.parent("out") as (d, name):
        with pytest.raises(OSError) as err:
            d.open(name, os.O_WRONLY | os.O_CREAT)
    assert err.value.errno in (errno.ELOOP, errno.ENOTDIR) and sorted(os.listdir(outside)) == ["keep"]


def test_write_atomic_replaces_the_link_itself_and_leaves_no_temporary_on_failure(world):
    inside, root, outside = world
    (root / "m.json").symlink_to(outside / "keep")
    inside.write_atomic("m.json", b"{}")
    assert (root / "m.json").read_bytes() == b"{}" and not (root / "m.json").is_symlink()
    assert (outside / "keep").read_text() == "precious\n"
    (root / "dir").mkdir()
    with pytest.raises(OSError):
        inside.write_atomic("dir", b"{}", temp_suffix=".part")
    assert sorted(os.listdir(root)) == ["dir", "m.json", "out"]


# ---------------------------------------------------------------- adversarially

_PARTS = st.sampled_from(["a", "b", "out", "..", ".", "", "f"])
_RELS = st.one_of(st.lists(_PARTS, min_size=1, max_size=4).map("/".join),
                  st.lists(_PARTS, min_size=1, max_size=3).map(lambda p: "/" + "/".join(p)),
                  st.sampled_from(["a\0b", "\udc2f", "out/keep", "a/out/keep"]))
_STEPS = st.lists(st.tuples(st.sampled_from(["makedirs", "symlink", "write", "append", "remove", "swap"]), _RELS),
                  max_size=12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_no_sequence_of_names_and_symlink_swaps_writes_outside_the_root(tmp_path_factory, steps):
    """Names as a lying box sends them (absolute, '..', NUL, bytes no name has), interleaved with
    directories swapped for links to outside the root: the world outside never changes."""
    base = tmp_path_factory.mktemp("world")
    root, outside = base / "root", base / "outside"
    (root / "a" / "b").mkdir(parents=True)
    (root / "out").symlink_to(outside)
    (root / "a" / "out").symlink_to("../../outside")
    outside.mkdir()
    (outside / "keep").write_text("precious\n")
    (outside / "a").mkdir()
    before = snapshot(outside, skip=())
    inside = contained.Root(root)
    for op, rel in steps:
        try:
            if op == "makedirs":
                inside.makedirs(rel)
            elif op == "symlink":
                inside.symlink(str(outside), rel)
            elif op == "write":
                inside.write_atomic(rel, b"written")
            elif op == "append":
                with inside.parent(rel) as (d, name):
                    fd = d.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                os.write(fd, b"appended")
                os.close(fd)
            elif op == "remove":
                inside.remove(rel)
            elif contained.problem(rel) is None:  # swap: the tree changes under the writer's feet
                inside.remove(rel)
                inside.symlink(str(outside), rel)
        except (contained.Outside, OSError):
            pass
    assert snapshot(outside, skip=()) == before
