"""The seccomp filter: a small classic-BPF program, assembled here, that bubblewrap installs.

It is a deny list in the spirit of Docker's and Flatpak's defaults, for x86-64
only: the code in the sandbox has no capabilities and its own namespaces
already, and the filter removes the kernel interfaces that have carried
escapes and leaks from unprivileged processes (ptrace and cross-process memory,
keyrings, BPF, perf, userfaultfd, io_uring, the mount API, module and kexec
loading, new namespaces, terminal injection). Denied calls fail with ``EPERM``;
``clone3`` fails with ``ENOSYS`` so the C library falls back to ``clone``,
whose flags the filter can read. A program of another architecture (32-bit
x86 calls, the x32 ABI) is killed. On other machines no filter is installed and
the result says so (``seccomp=False``).
"""

from __future__ import annotations

import functools
import platform
import struct

__all__ = ["DENIED_SYSCALLS", "filter_program", "supported"]

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW = 0, 4, 16, 24
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000

# Classic BPF opcodes (linux/filter.h).
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38

#: x86-64 system calls refused with EPERM, by name (numbers from asm/unistd_64.h).
DENIED_SYSCALLS: dict[str, int] = {
    "ptrace": 101,
    "syslog": 103,
    "uselib": 134,
    "personality": 135,
    "vhangup": 153,
    "pivot_root": 155,
    "_sysctl": 156,
    "adjtimex": 159,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "create_module": 174,
    "init_module": 175,
    "delete_module": 176,
    "get_kernel_syms": 177,
    "query_module": 178,
    "quotactl": 179,
    "nfsservctl": 180,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "move_pages": 279,
    "perf_event_open": 298,
    "fanotify_init": 300,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
    "quotactl_fd": 443,
}
_CLONE, _CLONE3, _IOCTL = 56, 435, 16
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME: no new namespaces.
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000
_CLONE_NAMESPACES |= 0x40000000 | 0x00000080
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C


#: One instruction before assembly: opcode, constant, jump-if-true and jump-if-false labels.
_Op = tuple[int, int, "str | None", "str | None"]


def supported() -> bool:
    """Whether this machine's architecture has a filter (x86-64 only)."""
    return platform.machine() in ("x86_64", "AMD64")


@functools.cache
def filter_program() -> bytes:
    """The filter as bubblewrap's ``--seccomp FD`` reads it: ``struct sock_filter`` entries."""
    deny, allow, nosys, kill = "deny", "allow", "nosys", "kill"
    # (opcode, k, jump-if-true label, jump-if-false label); a label is resolved to an offset below.
    body: list[_Op] = [
        (_LD_W_ABS, _ARCH, None, None),
        (_JEQ_K, _AUDIT_ARCH_X86_64, None, kill),
        (_LD_W_ABS, _NR, None, None),
        (_JGE_K, _X32_SYSCALL_BIT, kill, None),
        (_JEQ_K, _CLONE3, nosys, None),
    ]
    body += [(_JEQ_K, number, deny, None) for number in sorted(DENIED_SYSCALLS.values())]
    body += [
        (_JEQ_K, _CLONE, "clone", None),
        (_JEQ_K, _IOCTL, "ioctl", allow),
    ]
    labels: dict[str, list[_Op]] = {
        "clone": [(_LD_W_ABS, _ARG0_LOW, None, None), (_JSET_K, _CLONE_NAMESPACES, deny, allow)],
        "ioctl": [
            (_LD_W_ABS, _ARG1_LOW, None, None),
            (_JEQ_K, _TIOCSTI, deny, None),
            (_JEQ_K, _TIOCLINUX, deny, allow),
        ],
        allow: [(_RET_K, _RET_ALLOW, None, None)],
        deny: [(_RET_K, _RET_ERRNO | _EPERM, None, None)],
        nosys: [(_RET_K, _RET_ERRNO | _ENOSYS, None, None)],
        kill: [(_RET_K, _RET_KILL_PROCESS, None, None)],
    }
    program = list(body)
    where: dict[str, int] = {}
    for label, block in labels.items():
        where[label] = len(program)
        program += block
    encoded = []
    for index, (code, k, on_true, on_false) in enumerate(program):
        jt = 0 if on_true is None else where[on_true] - index - 1
        jf = 0 if on_false is None else where[on_false] - index - 1
        if not (0 <= jt <= 255 and 0 <= jf <= 255):  # pragma: no cover - the table above is fixed
            raise AssertionError("seccomp jump out of range")
        encoded.append(struct.pack("<HBBI", code, jt, jf, k))
    return b"".join(encoded)
