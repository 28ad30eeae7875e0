"""RFC 9162 Merkle tree hashing, inclusion and consistency proofs (section 2.1), pure functions.

The tree over leaves ``D[0:n]``: ``MTH({}) = SHA-256()``, ``MTH({d}) = SHA-256(0x00 || d)``,
and for ``n > 1`` ``MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))`` with ``k`` the
largest power of two smaller than ``n``. The 0x00/0x01 prefixes keep a leaf from passing for a
node (second-preimage). Functions here take *leaf hashes* (``leaf_hash(d)``), not leaf data,
so a store that keeps the hash of each entry never reads an entry to build a proof.

The verifiers follow the RFC's algorithms step for step (2.1.3.2 and 2.1.4.2); the generators
follow its recursive definitions (``PATH`` and ``PROOF``/``SUBPROOF``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "EMPTY_ROOT",
    "Subtree",
    "consistency_path",
    "consistency_proof",
    "inclusion_path",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "root_hash",
    "roots_at",
    "verify_consistency",
    "verify_inclusion",
]

#: The root of the empty tree: SHA-256 of nothing.
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n > 1``)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_hash(leaves: Sequence[bytes]) -> bytes:
    """``MTH`` of the leaf hashes ``leaves`` (one pass, no recursion)."""
    if not leaves:
        return EMPTY_ROOT
    return roots_at(leaves, [len(leaves)])[len(leaves)]


def roots_at(leaves: Iterable[bytes], sizes: Iterable[int]) -> dict[int, bytes]:
    """The root of every prefix of ``leaves`` whose size is in ``sizes``, in one pass.

    Keeps the compact range (the perfect subtrees of the binary decomposition of the size
    read so far); the root of a prefix folds them right to left, which is the RFC's split.
    Sizes beyond the leaves given are left out of the answer.
    """
    wanted = set(sizes)
    roots: dict[int, bytes] = {}
    if 0 in wanted:
        roots[0] = EMPTY_ROOT
    stack: list[tuple[int, bytes]] = []  # (height, hash) of perfect subtrees, left to right
    for size, leaf in enumerate(leaves, start=1):
        height, digest = 0, leaf
        while stack and stack[-1][0] == height:
            digest = node_hash(stack.pop()[1], digest)
            height += 1
        stack.append((height, digest))
        if size in wanted:
            root = stack[-1][1]
            for _, left in reversed(stack[:-1]):
                root = node_hash(left, root)
            roots[size] = root
    return roots


#: The hash of the subtree over entries ``[start, end)`` of some tree: how a proof reads the tree.
Subtree = Callable[[int, int], bytes]


def _over(leaves: Sequence[bytes]) -> Subtree:
    return lambda start, end: root_hash(leaves[start:end])


def inclusion_proof(leaves: Sequence[bytes], index: int, size: int | None = None) -> list[bytes]:
    """``PATH(index, D[0:size])``: the audit path of leaf ``index`` in the tree of ``size`` leaves."""
    size = len(leaves) if size is None else size
    if size > len(leaves):
        raise ValueError(f"no leaf {index} in a tree of {size} leaves")
    return inclusion_path(_over(leaves), index, size)


def inclusion_path(subtree: Subtree, index: int, size: int) -> list[bytes]:
    """`inclusion_proof` reading the tree through ``subtree`` (a store's cached nodes, say)."""
    if not 0 <= index < size:
        raise ValueError(f"no leaf {index} in a tree of {size} leaves")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:  # the RFC's recursion, unrolled: the path is built from the root down
        k = _split(end - start)
        if index - start < k:
            path.append(subtree(start + k, end))
            end = start + k
        else:
            path.append(subtree(start, start + k))
            start += k
    return path[::-1]


def consistency_proof(leaves: Sequence[bytes], first: int, second: int | None = None) -> list[bytes]:
    """``PROOF(first, D[0:second])``: shows the tree of ``second`` leaves extends that of ``first``."""
    second = len(leaves) if second is None else second
    if second > len(leaves):
        raise ValueError(f"no consistency proof from {first} to {second} leaves")
    return consistency_path(_over(leaves), first, second)


def consistency_path(subtree: Subtree, first: int, second: int) -> list[bytes]:
    """`consistency_proof` reading the tree through ``subtree``."""
    if not 0 < first <= second:
        raise ValueError(f"no consistency proof from {first} to {second} leaves")
    proof: list[bytes] = []
    start, end, m, complete = 0, second, first, True
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            proof.append(subtree(start + k, end))
            end = start + k
        else:
            proof.append(subtree(start, start + k))
            start, m, complete = start + k, m - k, False
    if not complete:
        proof.append(subtree(start, end))
    return proof[::-1]


def verify_inclusion(leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 2.1.3.2: does ``path`` prove leaf hash ``leaf`` at ``index`` in the tree ``root``?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 2.1.4.2: does ``proof`` show the tree ``second_root`` extends ``first_root``?"""
    if first == second:
        return not proof and first_root == second_root
    if not 0 < first < second or not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # an exact power of two: its root is the first node
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == first_root and sr == second_root and sn == 0
