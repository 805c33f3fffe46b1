"""Qpid Proton's C++ example broker (``broker.cpp``), built on demand to run beside minibroker.

Nothing of it is kept in this repository: the bench finds the example source that the
distribution ships and builds it once into a cache directory.  On Debian or Ubuntu::

    apt-get install -y g++ libqpid-proton-cpp12-dev libqpid-proton11-dev-examples
    g++ -O2 -std=c++11 -pthread -I/usr/share/proton/examples/cpp \\
        /usr/share/proton/examples/cpp/broker.cpp -o broker-cpp -lqpid-proton-cpp

(the second line is exactly what :func:`build` runs; ``broker.cpp`` includes the examples'
``options.hpp``, hence the ``-I``).  Sources are looked for in ``/usr/share/proton/examples/cpp``
and under ``/usr/share/doc/*/examples`` (gzipped or not); ``python -m bench --cpp-broker PATH``
uses a binary built elsewhere, ``--no-cpp-broker`` skips it.  The broker is started as
``broker-cpp -a 127.0.0.1:0`` and prints ``broker listening on PORT``.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["BUILD_COMMAND", "build", "cache_dir", "find_source", "locate", "listening_port", "plain_copy"]

SOURCE_DIRS = ("/usr/share/proton/examples/cpp", "/usr/share/doc/*/examples/cpp", "/usr/share/doc/*/examples")
BUILD_COMMAND = "g++ -O2 -std=c++11 -pthread -I{include} {source} -o {output} -lqpid-proton-cpp"


def find_source() -> Path | None:
    """The installed ``broker.cpp`` (or ``broker.cpp.gz``) beside its ``options.hpp``, if any."""
    for pattern in SOURCE_DIRS:
        for directory in sorted(glob.glob(pattern)):
            for name in ("broker.cpp", "broker.cpp.gz"):
                path = Path(directory) / name
                if path.is_file():
                    return path
    return None


def cache_dir() -> Path:
    """Where built binaries are kept: ``$XDG_CACHE_HOME/minibroker-bench`` (``~/.cache/...``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "minibroker-bench"


def plain_copy(path: Path, into: Path) -> Path:
    """``path`` itself, or its gunzipped copy in ``into``."""
    if path.suffix != ".gz":
        return path
    out = into / path.stem
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


def build(source: Path, cache: Path | None = None) -> Path:
    """Compile ``source`` once with :data:`BUILD_COMMAND` (cached by the source's hash); the binary's path."""
    cache = cache or cache_dir()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    binary = cache / f"broker-cpp-{digest}"
    if binary.is_file():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        workdir = Path(work)
        plain = plain_copy(source, workdir)
        for header in source.parent.glob("options.hpp*"):
            if header.suffix == ".gz":
                plain_copy(header, workdir)
            else:
                shutil.copy(header, workdir)
        output = workdir / "broker-cpp"
        command = BUILD_COMMAND.format(include=workdir, source=plain, output=output).split()
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"building broker.cpp failed ({' '.join(command)}):\n{proc.stderr[-2000:]}")
        os.replace(output, binary)  # atomic: a concurrent run sees the whole binary or none
    return binary


def locate(explicit: str | None = None) -> tuple[Path | None, str]:
    """The broker.cpp binary to run, or None and why it is skipped."""
    if explicit:
        path = Path(explicit)
        return (path, "") if os.access(path, os.X_OK) else (None, f"--cpp-broker {explicit} is not an executable")
    source = find_source()
    if source is None:
        return None, (
            "broker.cpp not installed (apt-get install g++ libqpid-proton-cpp12-dev libqpid-proton11-dev-examples)"
        )
    if shutil.which("g++") is None:
        return None, f"found {source} but no g++ to build it"
    try:
        return build(source), ""
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return None, str(exc).splitlines()[0]


def listening_port(line: str) -> int | None:
    """The port in broker.cpp's first line, ``broker listening on PORT``."""
    match = re.search(r"listening on (\d+)", line)
    return int(match.group(1)) if match else None
