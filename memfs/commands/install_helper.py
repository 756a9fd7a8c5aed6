"""``memfs install-helper``: ``mount -t fuse.memfs`` and ``/etc/fstab`` lines made to work."""

from __future__ import annotations

import argparse
from pathlib import Path

from memfs.commands.arguments import Parser
from memfs.commands.base import Command, Invocation


def arguments(parser: Parser) -> None:
    parser.add_argument("--sbin", type=Path, default=Path("/sbin"), help=argparse.SUPPRESS)


def run(call: Invocation) -> int:
    from memfs.helper import install_helper

    print(f"memfs: {install_helper(call.args.sbin)}")
    return 0


COMMAND = Command(
    name="install-helper",
    summary="let mount(8) and /etc/fstab mount memfs",
    description="""
Run as root. Links /sbin/mount.fuse.memfs to this memfs, so `mount -t fuse.memfs memfs DIR
-o key=value,…` and fstab lines work (mount(8) runs helpers with a fixed PATH, so the venv's
memfs must be linked where it looks).""",
    examples="""
sudo memfs install-helper
echo 'memfs /home/me/memory fuse.memfs noauto,user_id=alice 0 0' | sudo tee -a /etc/fstab""",
    arguments=arguments,
    run=run,
)
