"""RFC 9162 Merkle hashing and proofs against a brute-force tree built from the RFC's definitions."""

from __future__ import annotations

import hashlib

import pytest

from toolbox.audit._merkle import (
    EMPTY_ROOT,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_hash,
    roots_at,
    verify_consistency,
    verify_inclusion,
)

SIZES = range(1, 65)


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(data: list[bytes]) -> bytes:
    """MTH straight from RFC 9162 2.1.1 (over leaf data, recursive)."""
    if not data:
        return hashlib.sha256(b"").digest()
    if len(data) == 1:
        return hashlib.sha256(b"\x00" + data[0]).digest()
    k = _k(len(data))
    return hashlib.sha256(b"\x01" + mth(data[:k]) + mth(data[k:])).digest()


def path(m: int, data: list[bytes]) -> list[bytes]:
    """PATH(m, D[n]) from RFC 9162 2.1.3.1."""
    if len(data) == 1:
        return []
    k = _k(len(data))
    if m < k:
        return [*path(m, data[:k]), mth(data[k:])]
    return [*path(m - k, data[k:]), mth(data[:k])]


def subproof(m: int, data: list[bytes], b: bool) -> list[bytes]:
    """SUBPROOF(m, D[n], b) from RFC 9162 2.1.4.1."""
    n = len(data)
    if m == n:
        return [] if b else [mth(data)]
    k = _k(n)
    if m <= k:
        return [*subproof(m, data[:k], b), mth(data[k:])]
    return [*subproof(m - k, data[k:], False), mth(data[:k])]


DATA = [f"entry {i}".encode() for i in range(64)]
LEAVES = [leaf_hash(d) for d in DATA]
ROOTS = {n: mth(DATA[:n]) for n in range(0, 65)}


def test_hash_prefixes_are_the_rfcs() -> None:
    assert leaf_hash(b"x") == hashlib.sha256(b"\x00x").digest()
    assert node_hash(b"a", b"b") == hashlib.sha256(b"\x01ab").digest()
    assert root_hash([]) == EMPTY_ROOT == hashlib.sha256(b"").digest()


@pytest.mark.parametrize("n", SIZES)
def test_root_matches_the_rfc_definition(n: int) -> None:
    assert root_hash(LEAVES[:n]) == ROOTS[n]


def test_roots_at_every_prefix_in_one_pass() -> None:
    assert roots_at(LEAVES, range(0, 65)) == ROOTS
    assert roots_at(LEAVES[:3], [2, 5]) == {2: ROOTS[2]}  # sizes past the leaves are left out


@pytest.mark.parametrize("n", SIZES)
def test_inclusion_proofs_match_the_rfc_and_verify(n: int) -> None:
    for m in range(n):
        proof = inclusion_proof(LEAVES, m, n)
        assert proof == path(m, DATA[:n])
        assert verify_inclusion(LEAVES[m], m, n, proof, ROOTS[n])
        # Every other leaf, index, size, root or path is refused.
        assert not verify_inclusion(LEAVES[(m + 1) % 64], m, n, proof, ROOTS[n])
        assert not verify_inclusion(LEAVES[m], m, n, proof, ROOTS[n - 1] if n > 1 else b"\0" * 32)
        if n > 1:
            assert not verify_inclusion(LEAVES[m], (m + 1) % n, n, proof, ROOTS[n])
        assert not verify_inclusion(LEAVES[m], m, n, [*proof, LEAVES[0]], ROOTS[n])
        for i in range(len(proof)):
            bad = list(proof)
            bad[i] = bytes(32)
            assert not verify_inclusion(LEAVES[m], m, n, bad, ROOTS[n])
            assert not verify_inclusion(LEAVES[m], m, n, proof[:i] + proof[i + 1 :], ROOTS[n])


def test_inclusion_refuses_indexes_outside_the_tree() -> None:
    assert not verify_inclusion(LEAVES[0], 1, 1, [], ROOTS[1])
    assert not verify_inclusion(LEAVES[0], -1, 4, [], ROOTS[4])
    assert not verify_inclusion(LEAVES[0], 0, 0, [], EMPTY_ROOT)
    with pytest.raises(ValueError, match="no leaf"):
        inclusion_proof(LEAVES, 5, 5)
    with pytest.raises(ValueError, match="no leaf"):
        inclusion_proof(LEAVES[:3], 0, 4)


@pytest.mark.parametrize("n", SIZES)
def test_consistency_proofs_match_the_rfc_and_verify(n: int) -> None:
    for m in range(1, n + 1):
        proof = consistency_proof(LEAVES, m, n)
        assert proof == (subproof(m, DATA[:n], True) if m < n else [])
        assert verify_consistency(m, n, ROOTS[m], ROOTS[n], proof)
        if m == n:
            assert not verify_consistency(m, n, ROOTS[m], ROOTS[n], [LEAVES[0]])
            continue
        # A different old or new root (a rewritten history) fails, as does any changed node.
        assert not verify_consistency(m, n, ROOTS[m - 1] if m > 1 else bytes(32), ROOTS[n], proof)
        assert not verify_consistency(m, n, ROOTS[m], ROOTS[n - 1], proof)
        assert not verify_consistency(m, n, ROOTS[m], ROOTS[n], [])
        assert not verify_consistency(m, n, ROOTS[m], ROOTS[n], [*proof, LEAVES[0]])
        for i in range(len(proof)):
            bad = list(proof)
            bad[i] = bytes(32)
            assert not verify_consistency(m, n, ROOTS[m], ROOTS[n], bad)


def test_consistency_refuses_a_shrinking_or_empty_tree() -> None:
    assert not verify_consistency(4, 3, ROOTS[4], ROOTS[3], consistency_proof(LEAVES, 3, 4))
    assert not verify_consistency(0, 3, EMPTY_ROOT, ROOTS[3], [ROOTS[3]])
    with pytest.raises(ValueError, match="no consistency proof"):
        consistency_proof(LEAVES, 0, 3)
    with pytest.raises(ValueError, match="no consistency proof"):
        consistency_proof(LEAVES, 4, 3)
