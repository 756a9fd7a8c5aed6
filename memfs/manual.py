"""``memfs man`` and ``memfs completion``: generated from the parser and the option table,
so neither can drift from the installed memfs.  The manual's sections beyond the options
(EXIT STATUS, ENVIRONMENT, FILES) come from the same declarations the code runs on."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from memfs import __version__
from memfs.errors import EXIT_DATABASE, EXIT_FAILED, EXIT_MOUNT, EXIT_OK, EXIT_USAGE
from memfs.options import OPTIONS

#: The manual's NAME line.
SUMMARY = "mount an AI agent's long-term memory (IronClaw's database) as a directory"

_EXITS = (
    (EXIT_OK, "done"),
    (EXIT_FAILED, "the command ran but something it was asked to do failed (files not saved, "
                  "not imported, not exported)"),
    (EXIT_USAGE, "a mistake on the command line or in a setting"),
    (EXIT_DATABASE, "the database cannot be reached, refuses memfs, or holds no memory memfs "
                    "can use"),
    (EXIT_MOUNT, "the mount point or FUSE cannot be used (busy, not empty, no /dev/fuse)"),
    (130, "interrupted (Ctrl-C)"),
)  # fmt: skip

_FILES = (
    ("~/.local/share/memfs/pgdata", "the embedded PostgreSQL's data (--data-dir)"),
    ("~/.local/state/memfs/log/", "each mount's log, named after its mount point"),
    ("~/.local/state/memfs/recovery/", "what a mount could not save (memfs recover)"),
    ("$XDG_RUNTIME_DIR/memfs/", "each running mount's pid file and control socket"),
    ("~/.config/memfs/NAME.env", "a systemd profile's settings (memfs install-unit)"),
    ("DIR/.memfs-sync.json", "what the last memfs sync of DIR saw, bound to its database"),
    ("DIR/.memfs-export.json", "what the last memfs export into DIR wrote there"),
)


def _tagged(items: list[tuple[str, str]]) -> str:
    return "\n".join(f".TP\n.B {name}\n{text}" for name, text in items)


def manual(parser: argparse.ArgumentParser) -> str:
    """The roff manual page."""
    from argparse_manpage.manpage import Manpage

    data = {
        "description": SUMMARY,
        "project_name": "memfs",
        "version": __version__,
        "manual_title": "memfs manual",
    }
    page = Manpage(parser, _data=data)
    page.add_section("EXIT STATUS", ">", _tagged([(str(c), t) for c, t in _EXITS]))
    environment = []
    for option in OPTIONS:
        for index, name in enumerate(option.env):
            fallback = "" if index == 0 else f"; read if {option.env[0]} is not set"
            environment.append((name, f"{option.help} (as {option.cli_flag}{fallback})"))
    page.add_section("ENVIRONMENT", ">", _tagged(environment))
    page.add_section("FILES", ">", _tagged(list(_FILES)))
    return str(page)


#: Where each shell looks for a user's completion script.
COMPLETION_FILES = {
    "bash": "~/.local/share/bash-completion/completions/memfs",
    "zsh": "~/.zfunc/_memfs",
    "fish": "~/.config/fish/completions/memfs.fish",
}


def completion(parser: argparse.ArgumentParser, shell: str) -> str:
    import shtab

    return str(shtab.complete(parser, shell=shell))


def install_completion(parser: argparse.ArgumentParser, shell: str) -> str:
    """Write the script where ``shell`` finds it (folders made); says where, and what the
    shell still needs."""
    target = Path(os.path.expanduser(COMPLETION_FILES[shell]))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(completion(parser, shell))
    note = {
        "bash": "new shells complete memfs (bash-completion loads it)",
        "zsh": "add `fpath=(~/.zfunc $fpath); autoload -U compinit; compinit` to ~/.zshrc "
               "if it is not there",
        "fish": "new fish shells complete memfs",
    }[shell]  # fmt: skip
    return f"wrote {target}: {note}"
