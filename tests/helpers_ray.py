"""Ray in the tests: what workers are shipped, a free port and a short temp folder.

``ray_ships`` makes the named test modules travel by value with pickled tasks (a worker imports
only the masprm package a run ships it), ``free_port`` finds an unused local port, and
``ray_temp_dir`` makes a Ray temp folder whose socket paths stay short. Use it for tests that
start Ray or connect to a cluster.
"""

from __future__ import annotations

import sys
from pathlib import Path


def ray_ships(*modules: str) -> None:
    """Ray workers import only the masprm package the run ships them: what the named test modules
    define (scripted setups, fake policies) travels with the pickled tasks instead."""
    from ray import cloudpickle

    for name in modules:
        cloudpickle.register_pickle_by_value(sys.modules[name])


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ray_temp_dir() -> Path:
    """A fresh Ray temp folder (sessions, the address file) under /tmp: Ray's socket paths must stay short."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
