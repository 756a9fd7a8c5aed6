"""``python -m memfs``."""

import sys

from memfs.cli import main

sys.exit(main())
