"""What an `oxigraph_worker` process does to itself before it opens the store (Linux).

It dies with its parent (a parent-death signal, and a watchdog on the parent pid for the
moment before the signal is armed), it lives under an address-space and a per-query CPU
limit, and a seccomp filter denies it every IP socket: the embedded store has no way to
reach a network, whatever SERVICE a query names."""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal
import struct
import threading
import time

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EACCES = 13
AF_INET, AF_INET6 = 2, 10
# (audit arch, socket syscall number) of the architectures the filter knows
_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198), "arm64": (0xC00000B7, 198)}


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL when the parent exits; a watchdog thread covers a parent already gone."""
    if os.getppid() != parent_pid:
        os._exit(1)
    try:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def exit_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> None:
    """In a child between fork and exec (`Popen(preexec_fn=…)`): `sig` when the parent dies, however it dies
    (the parent-death signal survives exec); exit at once when the parent is already gone."""
    try:
        _libc().prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)


def limit_memory(megabytes: int) -> str:
    """An address-space limit of `megabytes` (0: none), never above the hard limit the process was started under
    (`ulimit -v`: raising it is refused); "" when set, else one line saying why it could not be."""
    if megabytes <= 0:
        return ""
    return _set_limit(
        resource.RLIMIT_AS, megabytes * 1024 * 1024, lower_hard=True, what=f"{megabytes} MB address-space limit"
    )


def limit_cpu_for_next_query(seconds: float) -> str:
    """RLIMIT_CPU counts the process's whole life: re-arm it as used-so-far + this query's share, within the hard
    limit; "" when set, else one line saying why it could not be."""
    if seconds <= 0:
        return ""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
    return _set_limit(resource.RLIMIT_CPU, soft, lower_hard=False, what=f"{seconds:g} s CPU limit per query")


def _set_limit(which: int, soft: int, *, lower_hard: bool, what: str) -> str:
    """Set the soft limit `which` to `soft`, within its hard limit (`lower_hard`: the hard limit lowered to it too);
    "" when set, else one line saying why it could not be."""
    hard = resource.getrlimit(which)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    try:
        resource.setrlimit(which, (soft, soft if lower_hard else hard))
    except (ValueError, OSError) as exc:
        return f"oxigraph worker: the {what} cannot be set ({exc}); running without it"
    return ""


def deny_network() -> bool:
    """Install a seccomp filter that fails socket(AF_INET|AF_INET6); False where unsupported."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        return False
    audit_arch, socket_nr = arch
    ld, jeq, ret = 0x20, 0x15, 0x06
    program = [
        (ld, 0, 0, 4),  # 0: A = arch
        (jeq, 0, 5, audit_arch),  # 1: other arch -> allow
        (ld, 0, 0, 0),  # 2: A = syscall number
        (jeq, 0, 3, socket_nr),  # 3: not socket() -> allow
        (ld, 0, 0, 16),  # 4: A = low word of the address family
        (jeq, 2, 0, AF_INET),  # 5: IPv4 -> deny
        (jeq, 1, 0, AF_INET6),  # 6: IPv6 -> deny
        (ret, 0, 0, SECCOMP_RET_ALLOW),  # 7
        (ret, 0, 0, SECCOMP_RET_ERRNO | EACCES),  # 8
    ]
    raw = b"".join(struct.pack("HBBI", *insn) for insn in program)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(program), ctypes.cast(buffer, ctypes.c_void_p))
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0
