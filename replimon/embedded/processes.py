"""Running the embedded servers as child processes: a free local port, and a command that dies
with its parent. Shared by the broker and the database (``broker.py``, ``postgres.py``)."""

from __future__ import annotations

import shutil
import socket
import sys


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago.

    The port is only reserved while this function runs; another process can take it before the
    caller binds it. The embedded servers therefore retry with a new port when the bind fails.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def die_with_parent(cmd: list[str], signame: str) -> list[str]:
    """``cmd`` run so that the kernel sends it ``signame`` when the process that started it dies
    (Linux ``PR_SET_PDEATHSIG`` through util-linux ``setpriv``, which then executes ``cmd`` under
    the same pid): a test run or a job killed with SIGKILL leaves no broker or database behind.
    Unchanged where ``setpriv`` is missing. The signal follows the starting *thread*: start the
    servers from a thread that outlives them (the main thread does)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or not sys.platform.startswith("linux"):
        return cmd
    return [setpriv, "--pdeathsig", signame, "--", *cmd]
