"""``init_helper_first``: the helper's socket ends below the device, and no descriptor
is leaked on any path (a socket pair made the way libfuse makes it, without a mount)."""

from __future__ import annotations

import os
import socket

import pytest

from memfs.auto_unmount import init_helper_first


def _open_fds() -> set[int]:
    """Open descriptors (without the one the listing itself used)."""
    listed = {int(name) for name in os.listdir("/proc/self/fd")}
    return {fd for fd in listed if _is_open(fd)}


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_the_helper_socket_is_moved_below_the_device() -> None:
    kept: list[socket.socket] = []
    device: list[int] = []

    def libfuse_mount() -> None:  # as libfuse: a pair, the helper's end closed, the
        ours, helpers = socket.socketpair()  # device received into its freed slot
        helpers.close()
        device.append(os.open(os.devnull, os.O_RDONLY))
        kept.append(ours)

    before = _open_fds()
    init_helper_first(libfuse_mount)
    after = _open_fds()
    try:
        socket_fd = (after - before - {device[0]}).pop()
        assert len(after - before) == 2  # the device and the socket: the placeholder reused
        assert socket_fd < device[0]
        assert os.readlink(f"/proc/self/fd/{socket_fd}").startswith("socket:")
        assert not os.get_inheritable(socket_fd)
    finally:
        for fd in after - before:
            os.close(fd)
        kept[0].detach()


def test_two_new_socket_pairs_move_nothing_and_leak_nothing() -> None:
    pairs: list[tuple[socket.socket, socket.socket]] = []
    before = _open_fds()
    init_helper_first(lambda: pairs.extend([socket.socketpair(), socket.socketpair()]))
    assert _open_fds() - before == {s.fileno() for pair in pairs for s in pair}
    for pair in pairs:
        for s in pair:
            s.close()


def test_a_failed_mount_leaks_no_placeholder() -> None:
    before = _open_fds()

    def failing() -> None:
        raise RuntimeError("fuse: mountpoint is busy")

    with pytest.raises(RuntimeError, match="busy"):
        init_helper_first(failing)
    assert _open_fds() == before
