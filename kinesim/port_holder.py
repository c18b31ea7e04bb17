"""Who holds a TCP port: for `kinesim serve`'s message when its port is taken.

On Linux, read from /proc (the sockets bound to the port in /proc/net/tcp and tcp6, then the
process whose open files include one of them); elsewhere, or when /proc says nothing, ask `ss`
or `lsof` if the machine has them. Only processes the user may look into are found (another
user's server is seen by root alone): then nothing is named."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

COMMAND_CHARS = 160  # a command line longer than this is cut, with "..."


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})" if self.command else f"pid {self.pid}"


def port_holders(port: int) -> list[Holder]:
    """The processes with a socket bound to (or listening on) TCP `port`, in pid order; [] when
    none can be told."""
    for find in (_from_proc, _from_ss, _from_lsof):
        with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
            found = find(port)
            if found:
                return sorted(set(found), key=lambda h: h.pid)
    return []


def _bound_inodes(port: int, tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> set[str]:
    """The inodes of the sockets bound to `port` that have no peer (listening, or bound only)."""
    inodes = set()
    for table in tables:
        with contextlib.suppress(OSError), open(table, encoding="ascii") as lines:
            next(lines, None)  # the header
            for line in lines:
                fields = line.split()
                if len(fields) < 10:
                    continue
                local, remote, inode = fields[1], fields[2], fields[9]
                if int(local.rsplit(":", 1)[1], 16) == port and int(remote.rsplit(":", 1)[1], 16) == 0 \
                        and inode != "0":
                    inodes.add(inode)
    return inodes


def _from_proc(port: int) -> list[Holder]:
    inodes = _bound_inodes(port)
    if not inodes:
        return []
    wanted = {f"socket:[{inode}]" for inode in inodes}
    holders = []
    for pid in (name for name in os.listdir("/proc") if name.isdigit()):
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # another user's process, or gone
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"{fd_dir}/{fd}") in wanted:
                    holders.append(Holder(int(pid), _proc_command(pid)))
                    break
    return holders


def _proc_command(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return ""
    return _short(" ".join(a.decode("utf-8", "replace") for a in argv))


def _short(command: str) -> str:
    return command if len(command) <= COMMAND_CHARS else command[:COMMAND_CHARS - 3] + "..."


def _from_ss(port: int) -> list[Holder]:
    if not shutil.which("ss"):
        return []
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5).stdout
    # users:(("python3",pid=1234,fd=5),...): ss gives the process name, /proc (if any) its command.
    return [Holder(int(pid), _proc_command(pid) or name)
            for name, pid in re.findall(r'\("([^"]*)",pid=(\d+)', out)]


def _from_lsof(port: int) -> list[Holder]:
    if not shutil.which("lsof"):
        return []
    out = subprocess.run(["lsof", "-nP", f"-iTCP:{port}", "-sTCP:LISTEN", "-Fpc"], capture_output=True, text=True,
                         timeout=5).stdout
    holders, pid = [], None
    for line in out.splitlines():
        if line.startswith("p"):
            pid = line[1:]
        elif line.startswith("c") and pid:
            holders.append(Holder(int(pid), _proc_command(pid) or line[1:]))
    return holders


def port_taken_message(host: str, port: int, reason: str, flag: str = "--port") -> str:
    """What `kinesim serve` says when `host:port` is taken: who holds it, if that can be found,
    and what to do."""
    holders = port_holders(port)
    if not holders:
        return (f"cannot listen on {host}:{port}: {reason}. Another server (kinesim, LocalStack...) is probably "
                f"using it: stop it, or choose another {flag}.")
    who = ", ".join(str(h) for h in holders[:3]) + (f" and {len(holders) - 3} more" if len(holders) > 3 else "")
    pids = " ".join(str(h.pid) for h in holders[:3])
    return (f"cannot listen on {host}:{port}: {reason}; it is held by {who}. Stop it (kill {pids}), "
            f"or choose another {flag}.")
