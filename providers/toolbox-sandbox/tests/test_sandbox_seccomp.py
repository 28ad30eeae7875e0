"""The hand-assembled seccomp program: its shape, checked by a small classic-BPF interpreter."""

from __future__ import annotations

import struct

import pytest

from toolbox_sandbox._seccomp import DENIED_SYSCALLS, filter_program

ALLOW, EPERM, ENOSYS, KILL = 0x7FFF0000, 0x00050001, 0x00050026, 0x80000000
X86_64, I386 = 0xC000003E, 0x40000003


def evaluate(program: bytes, nr: int, arch: int = X86_64, args: tuple[int, ...] = (0,) * 6) -> int:
    """Run the filter on one seccomp_data, as the kernel would (the opcodes it uses)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
    ops = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x15:
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:
            pc += 1 + (jt if acc >= k else jf)
        elif code == 0x45:
            pc += 1 + (jt if acc & k else jf)
        elif code == 0x06:
            return k
        else:  # pragma: no cover - an opcode the program must not use
            raise AssertionError(f"unknown opcode {code:#x}")


PROGRAM = filter_program()


def test_the_program_is_within_the_kernel_limit():
    assert len(PROGRAM) % 8 == 0 and len(PROGRAM) // 8 < 4096


@pytest.mark.parametrize(("name", "number"), sorted(DENIED_SYSCALLS.items()))
def test_denied_calls_get_eperm(name, number):
    assert evaluate(PROGRAM, number) == EPERM, name


@pytest.mark.parametrize("number", [0, 1, 2, 3, 9, 57, 59, 60, 231, 257, 262, 318])
def test_ordinary_calls_are_allowed(number):  # read, write, open, close, mmap, fork, execve, exit...
    assert evaluate(PROGRAM, number) == ALLOW


def test_clone3_is_nosys_so_the_c_library_falls_back_to_clone():
    assert evaluate(PROGRAM, 435) == ENOSYS


@pytest.mark.parametrize(
    ("flags", "expected"),
    [(0x11, ALLOW), (0x003D0F00, ALLOW), (0x10000000, EPERM), (0x20000000 | 0x11, EPERM), (0x80, EPERM)],
)
def test_clone_with_a_new_namespace_is_refused(flags, expected):
    assert evaluate(PROGRAM, 56, args=(flags, 0, 0, 0, 0, 0)) == expected


@pytest.mark.parametrize(("request_code", "expected"), [(0x5412, EPERM), (0x541C, EPERM), (0x5401, ALLOW)])
def test_terminal_injection_ioctls_are_refused(request_code, expected):
    assert evaluate(PROGRAM, 16, args=(0, request_code, 0, 0, 0, 0)) == expected


def test_other_architectures_and_x32_are_killed():
    assert evaluate(PROGRAM, 1, arch=I386) == KILL
    assert evaluate(PROGRAM, 0x40000000 | 1) == KILL
