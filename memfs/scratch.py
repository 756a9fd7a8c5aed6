"""Which names are editor and sync-tool scratch, kept out of the agent's memory.

Editors and sync tools save through swap files, backups, probes and temporaries.  Every
row of ``memory_documents`` is memory the agent reads and search returns, so those names
live only in the daemon (see ``memfs.vfs``).  The rules are regular expressions matched
against one name (not a path); a name below a scratch directory is scratch too.

Tentative names (rsync's ``.name.XXXXXX`` temporaries) also match real dotfiles such as
``.github.action``: they start as scratch, and a tentative file that is closed and not
renamed within ``TENTATIVE_GRACE`` seconds is promoted to a document.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

TENTATIVE_GRACE = 3.0


class Kind(enum.Enum):
    DOCUMENT = "document"
    SCRATCH = "scratch"
    TENTATIVE = "tentative"


#: vim's "can I recreate the file?" probe: 4913, then 4913 + 123*k on collision.
_VIM_PROBES = "|".join(str(4913 + 123 * k) for k in range(100))

#: (pattern, what uses it).  Documented in SEMANTICS.md; extend with --scratch-pattern.
DEFAULT_SCRATCH_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\..+\.sw[a-px]|\.sw[a-px]", "vim/neovim/nano swap files and vim's .swx probe"),
    (r".+\.un~", "vim undo files"),
    (rf"(?:{_VIM_PROBES})", "vim's 4913 write probe"),
    (r".+~", "backups: vim, emacs, nano --backup, rsync -b"),
    (r".+\.~\d+~", "emacs numbered backups"),
    (r"\.#.+", "emacs lock files (and their .#-emacsXXXXXX nonces)"),
    (r"#.+#", "emacs auto-save files"),
    (r"\.~tmp~", "rsync --delay-updates directory"),
    (r".+\.partial", "rclone partial uploads"),
    (r"\.unison\..+", "unison temporaries and backups (files and directories)"),
    (r".+\.vsctmp", "VS Code atomic-write temporaries"),
    (r".+\.lock", "git and other lock files"),
    (r"tmp_obj_.+|tmp_pack_.+|tmp_idx_.+", "git object temporaries"),
    (r"\.goutputstream-.+", "GNOME/GIO atomic writes"),
    (r"sed[A-Za-z0-9]{6}", "GNU sed -i temporaries"),
    (r".+___jb_(?:tmp|old)___", "JetBrains safe-write temporaries"),
    (r"\.~lock\..+#", "LibreOffice lock files"),
    (r"~\$.+", "Microsoft Office owner files"),
    (r"~[A-Z]{2,4}[0-9A-F]{4}\.tmp", "Microsoft Office save temporaries (~WRD0000.tmp)"),
    (r"[0-9A-F]{8}\.tmp", "Microsoft Excel save temporaries (34429E5E.tmp)"),
    (r"ppt[0-9A-F]{1,4}\.tmp", "Microsoft PowerPoint save temporaries (ppt1A2B.tmp)"),
    (r"\..+\.kate-swp", "Kate swap files"),
    (r"\.DS_Store|\._.+|Thumbs\.db|desktop\.ini", "macOS and Windows metadata"),
    (
        r"\.Spotlight-V100|\.Trashes|\.fseventsd|\.metadata_never_index(?:_unless_rootfs)?"
        r"|\.TemporaryItems|\.apdisk",
        "macOS Finder's volume state (over WebDAV)",
    ),
    (r"\.Trash-.+|\.Trash", "desktop trash directories"),
    (r"\.nfs[0-9a-f]+", "NFS silly-rename files"),
)

DEFAULT_TENTATIVE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\..+\.[A-Za-z0-9]{6}", "rsync temporaries (.name.XXXXXX); also real dotfiles"),
)

#: Names a mount refuses outright (EPERM): a repository kept only in memory would vanish
#: at unmount with all its history.
REFUSED_NAMES = frozenset({".git"})

#: Top-level folders where tools keep their own state: never memory (not chunked, not
#: searched, not in the agent's tables), yet kept across mounts in memfs's own schema
#: (``memfs.vfs.tool_folders``).  Extend with ``--tool-folder``.
DEFAULT_TOOL_FOLDERS: tuple[tuple[str, str], ...] = (
    (".obsidian", "Obsidian's vault settings, themes and plugins"),
    (".trash", "Obsidian's deleted notes (its 'move to vault trash' setting)"),
    (".vscode", "VS Code's workspace settings"),
    (".idea", "JetBrains IDEs' project settings"),
)


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    parts = [f"(?:{p})" for p in patterns]
    return re.compile("|".join(parts), re.DOTALL) if parts else None


@dataclass
class ScratchRules:
    """Compiled scratch and tentative patterns."""

    scratch: list[str] = field(default_factory=lambda: [p for p, _ in DEFAULT_SCRATCH_PATTERNS])
    tentative: list[str] = field(default_factory=lambda: [p for p, _ in DEFAULT_TENTATIVE_PATTERNS])
    tool_folders: frozenset[str] = frozenset(name for name, _ in DEFAULT_TOOL_FOLDERS)

    def __post_init__(self) -> None:
        self._scratch = _compile(self.scratch)
        self._tentative = _compile(self.tentative)

    @classmethod
    def with_extra(cls, extra: Iterable[str], tools: Iterable[str] = ()) -> ScratchRules:
        rules = cls()
        rules.scratch = rules.scratch + list(extra)
        rules.tool_folders = rules.tool_folders | frozenset(tools)
        rules.__post_init__()
        return rules

    def classify(self, name: str) -> Kind:
        if self._scratch is not None and self._scratch.fullmatch(name):
            return Kind.SCRATCH
        if self._tentative is not None and self._tentative.fullmatch(name):
            return Kind.TENTATIVE
        return Kind.DOCUMENT
