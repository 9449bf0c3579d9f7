"""``python -m sparsesync ARGS``: runs the ``sparsesync`` command-line tool (diff / apply / inspect on
safetensors files, serve / pull over TCP; docs/CLI.md) with ARGS.

The tool is a separate C++ program, found as ``$SPARSESYNC_CLI``, next to this package, or on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence


def find_cli() -> Optional[str]:
    """The path of the ``sparsesync`` program, or None."""
    explicit = os.environ.get("SPARSESYNC_CLI")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    here = Path(__file__).resolve().parent
    for candidate in (here / "bin" / "sparsesync", here / "sparsesync"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("sparsesync")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cli = find_cli()
    if cli is None:
        print("python -m sparsesync: the sparsesync command-line tool was not found (looked at $SPARSESYNC_CLI, "
              "next to the package and on PATH). Build it from the repository with\n"
              "  cmake -S . -B build -G Ninja && cmake --build build --target sparsesync_cli\n"
              "and put build/tools/sparsesync/sparsesync on PATH (or set SPARSESYNC_CLI). "
              "The Python API itself (import sparsesync) does not need it.", file=sys.stderr)
        return 127
    return subprocess.call([cli, *args])


if __name__ == "__main__":
    sys.exit(main())
