"""``toolbox audit keygen|checkpoint|prove|check-proof|consistency|witness-serve``, ``verify``'s witnesses.

The Merkle log of a SQLite or PostgreSQL store (`toolbox.audit._log`): ``keygen`` makes the
Ed25519 key (the private half in a file only its owner can read, the public half as a
verifier key to publish); ``checkpoint`` sequences the new events, signs the tree head and
hands it to the witnesses; ``prove`` prints an event's inclusion proof as JSON, which
``check-proof`` (or the script in docs/audit-verify.md) verifies without the database; ``verify
--public-key FILE --witness-dir DIR`` checks the store against every witnessed checkpoint.

A SQL witness's URL is read from the environment variable ``--witness-url-env`` names, never
from the command line.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolbox.audit._sink import AuditSink
from toolbox.cli._common import EXIT_OK, EXIT_UNUSABLE, PROG, CliError, Document, clean, emit_json, emit_lines

__all__ = ["add_log_actions", "add_witness_options", "verify_against_witnesses"]

_MAX_PROOF_FILE = 1 << 20


def add_witness_options(parser: argparse.ArgumentParser) -> None:
    """``--witness-dir DIR`` and ``--witness-url-env VAR`` (each repeatable), ``--public-key FILE``."""
    group = parser.add_argument_group("signed checkpoints (the Merkle log)")
    group.add_argument(
        "--witness-dir", metavar="DIR", action="append", default=[], help="a directory witness (repeatable)"
    )
    group.add_argument(
        "--witness-url-env",
        metavar="VAR",
        action="append",
        default=[],
        help="the NAME of a variable holding a SQL witness's database URL (repeatable)",
    )
    group.add_argument(
        "--witness-http",
        metavar=("URL", "KEY_FILE"),
        nargs=2,
        action="append",
        default=[],
        help="an HTTP witness (toolbox audit witness-serve) and its verifier key file (repeatable)",
    )
    group.add_argument(
        "--public-key",
        metavar="FILE",
        help="the log's verifier keys, one a line (old keys too, after a rotation)",
    )
    group.add_argument("--origin", metavar="NAME", help="the log's name in its checkpoints")


def add_log_actions(
    actions: Any, *, store: Sequence[argparse.ArgumentParser], plain: Sequence[argparse.ArgumentParser]
) -> None:
    """Register ``keygen``, ``checkpoint``, ``prove``, ``check-proof`` and ``consistency``."""
    keygen = actions.add_parser(
        "keygen",
        parents=list(plain),
        help="make the Ed25519 key that signs checkpoints",
        description="Write a new Ed25519 private key to FILE (mode 600, never overwritten) and its "
        "verifier key to FILE.pub; print the verifier key.",
    )
    keygen.add_argument("key_file", metavar="FILE", help="where the private key goes")
    keygen.add_argument("--name", required=True, help="the key's name (e.g. the log's host and path)")
    keygen.set_defaults(audit_standalone=_keygen)

    checkpoint = actions.add_parser(
        "checkpoint",
        parents=list(store),
        help="sequence new events, sign the tree head, hand it to the witnesses",
        description="Give every new event its log index, sign the tree head with the key file, "
        "keep it in the store and give it to every witness (exit 1 when a witness refuses it). "
        "With --policy, the file's [audit.checkpoints] gives what the options do not.",
    )
    checkpoint.add_argument("--key", metavar="FILE", help="the private key file (keygen)")
    checkpoint.add_argument("--key-name", metavar="NAME", help="the key's name")
    add_witness_options(checkpoint)
    checkpoint.set_defaults(audit_handler=_checkpoint)

    prove = actions.add_parser(
        "prove",
        parents=list(store),
        help="print an event's inclusion proof (JSON)",
        description="Print the inclusion proof of EVENT_ID in the first checkpoint that covers it: "
        "the event, its chain text, its log index, the audit path and the signed checkpoint.",
    )
    prove.add_argument("event_id", metavar="EVENT_ID")
    prove.set_defaults(audit_handler=_prove)

    check = actions.add_parser(
        "check-proof",
        parents=list(plain),
        help="verify an inclusion proof without the database",
        description="Verify a proof printed by `toolbox audit prove` against the log's public key.",
    )
    check.add_argument("proof_file", metavar="PROOF_FILE", help="the proof (JSON); - reads standard input")
    check.add_argument("--public-key", metavar="FILE", required=True, help="the log's verifier keys")
    check.set_defaults(audit_standalone=_check_proof)

    serve = actions.add_parser(
        "witness-serve",
        parents=list(plain),
        help="run an HTTP witness that keeps and countersigns checkpoints",
        description="Serve POST /add-checkpoint and GET /checkpoints: keep each checkpoint the log's "
        "keys signed in DIR (consistency checked, forks refused) and answer with a cosignature.",
    )
    serve.add_argument("--dir", required=True, help="where the witness keeps checkpoints")
    serve.add_argument("--public-key", metavar="FILE", required=True, help="the log's verifier keys")
    serve.add_argument("--key", metavar="FILE", required=True, help="the witness's own private key (keygen)")
    serve.add_argument("--key-name", metavar="NAME", required=True, help="the witness's key name")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8990, help="the port (default 8990)")
    serve.set_defaults(audit_standalone=_witness_serve)

    consistency = actions.add_parser(
        "consistency",
        parents=list(store),
        help="prove that a later checkpoint extends an earlier one",
        description="Print (JSON) and verify the consistency proof between two signed checkpoints.",
    )
    consistency.add_argument("old", metavar="OLD_CHECKPOINT", help="a signed checkpoint file")
    consistency.add_argument("new", metavar="NEW_CHECKPOINT", help="a later signed checkpoint file")
    consistency.add_argument("--public-key", metavar="FILE", required=True, help="the log's verifier keys")
    consistency.set_defaults(audit_handler=_consistency)


# -- helpers --------------------------------------------------------------------


def _merkle_log(sink: AuditSink) -> Any:
    from toolbox.audit._log import MerkleLog
    from toolbox.audit.sinks._sql import SqlSink

    if not isinstance(sink, SqlSink):
        raise CliError("the Merkle log needs a SQLite or PostgreSQL store (a JSON Lines file has none)")
    return MerkleLog(sink)


def _keys(path: str) -> list[Any]:
    from toolbox.audit._note import VerifierKey

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read the public key file {clean(path)!r}: {type(exc).__name__}") from None
    keys = [
        VerifierKey.parse(line) for line in text.splitlines() if line.strip() and not line.startswith("#")
    ]
    if not keys:
        raise CliError(f"{clean(path)!r} holds no verifier key")
    return keys


def _env_url(name: str) -> str:
    from toolbox.cli._audit_store import _check_env_name

    url = os.environ.get(_check_env_name(name, "--witness-url-env"))
    if not url:
        raise CliError(f"environment variable {name} is not set (it must hold the SQL witness's URL)")
    return url


def _witnesses(args: argparse.Namespace, keys: Sequence[Any], origin: str) -> list[Any]:
    from toolbox.audit._witness import DirectoryWitness, SqlWitness, Witness
    from toolbox.audit._witness_http import HttpWitness

    stores: list[Any] = [DirectoryWitness(d) for d in args.witness_dir]
    stores += [SqlWitness(_env_url(v), origin=origin) for v in args.witness_url_env]
    remote = [HttpWitness(url, _keys(key_file)[0], keys) for url, key_file in args.witness_http]
    return [*(Witness(s, keys) for s in stores), *remote]


def _read_text(path: str, what: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read(_MAX_PROOF_FILE)
        with open(path, encoding="utf-8") as handle:
            return handle.read(_MAX_PROOF_FILE)
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {what} {clean(path)!r}: {type(exc).__name__}") from None


# -- keygen ---------------------------------------------------------------------


def _keygen(args: argparse.Namespace) -> int:
    from toolbox.audit._note import generate_key

    pem, verifier = generate_key(args.name)
    path = Path(args.key_file)
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise CliError(f"{clean(str(path))!r} exists: a key is never overwritten") from None
    with os.fdopen(handle, "wb") as out:
        out.write(pem)
    Path(f"{path}.pub").write_text(verifier.text() + "\n", encoding="utf-8")
    if args.json:
        emit_json({"key_file": str(path), "public_key_file": f"{path}.pub", "verifier_key": verifier.text()})
    else:
        emit_lines([verifier.text()])
    return EXIT_OK


# -- checkpoint -----------------------------------------------------------------


def _policy_checkpoints(args: argparse.Namespace) -> Any:
    """``[audit.checkpoints]`` of ``--policy FILE`` (None without one)."""
    if not getattr(args, "policy", None):
        return None
    from toolbox.audit._checkpointing import checkpoint_settings
    from toolbox.registry._policy import ToolPolicy

    policy = ToolPolicy.from_file(args.policy)
    audit = policy.governance.get("audit")
    return (
        checkpoint_settings(audit, source=policy.source or args.policy) if isinstance(audit, dict) else None
    )


def _checkpoint(args: argparse.Namespace, sink: AuditSink) -> int:
    from toolbox.audit._checkpointing import CheckpointSettings
    from toolbox.audit._log import check_origin
    from toolbox.audit._note import open_checkpoint
    from toolbox.audit._witness import WitnessError

    configured = _policy_checkpoints(args)
    origin = args.origin or (configured.origin if configured else None)
    key_file = args.key or (configured.key_file if configured else None)
    key_name = args.key_name or (configured.key_name if configured else None)
    if not origin or not key_file or not key_name:
        raise CliError("give --origin, --key and --key-name (or a policy file with [audit.checkpoints])")
    settings = CheckpointSettings(
        origin=check_origin(origin),
        key_file=key_file,
        key_name=key_name,
        witness_dirs=(*args.witness_dir, *(configured.witness_dirs if configured else ())),
        witness_url_envs=(*args.witness_url_env, *(configured.witness_url_envs if configured else ())),
        witness_http=(
            *((url, key_file) for url, key_file in args.witness_http),
            *(configured.witness_http if configured else ()),
        ),
    )
    signer = settings.signer()
    keys = [signer.verifier_key, *(_keys(args.public_key) if args.public_key else [])]
    log = _merkle_log(sink)
    note = log.checkpoint(signer, settings.origin)
    checkpoint = open_checkpoint(note, keys)
    refused = ""
    try:
        log.publish(note, settings.witnesses(keys))
    except WitnessError as exc:
        refused = str(exc)
    if args.json:
        emit_json({"tree_size": checkpoint.size, "checkpoint": note, "refused": refused or None})
    else:
        print(note, end="")
    if refused:
        print(f"{PROG}: a witness refused the checkpoint: {clean(refused)}", file=sys.stderr)
        return EXIT_UNUSABLE
    return EXIT_OK


# -- prove and check-proof ------------------------------------------------------


def _prove(args: argparse.Namespace, sink: AuditSink) -> int:
    from toolbox.audit._proofs import ProofError, inclusion_document

    _merkle_log(sink)  # a SQL store, or a clear error
    try:
        document = inclusion_document(sink, args.event_id)  # type: ignore[arg-type] # checked above
    except ProofError as exc:
        raise CliError(f"event {clean(args.event_id)!r}: {exc}") from None
    print(json.dumps(document, indent=2, ensure_ascii=False))
    return EXIT_OK


def _check_proof(args: argparse.Namespace) -> int:
    from toolbox.audit._note import CheckpointError
    from toolbox.audit._proofs import check_proof

    keys = _keys(args.public_key)
    try:
        document = json.loads(_read_text(args.proof_file, "the proof"))
        line = check_proof(document, keys)
    except RecursionError:
        emit_lines(["FAILED: not a proof (nested too deeply)"])
        return EXIT_UNUSABLE
    except (ValueError, CheckpointError) as exc:
        emit_lines([f"FAILED: {clean(exc)}"])
        return EXIT_UNUSABLE
    emit_lines([clean(line)])
    return EXIT_OK


# -- witness-serve --------------------------------------------------------------


def _witness_serve(args: argparse.Namespace) -> int:
    from toolbox.audit._note import KeyFileSigner
    from toolbox.audit._witness import DirectoryWitness, Witness
    from toolbox.audit._witness_http import WitnessServer

    witness = Witness(DirectoryWitness(args.dir), _keys(args.public_key))
    server = WitnessServer(
        witness, KeyFileSigner(args.key, name=args.key_name), host=args.host, port=args.port
    )
    print(f"witness serving at {server.url} (checkpoints in {clean(args.dir)})", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return EXIT_OK


# -- consistency ----------------------------------------------------------------


def _consistency(args: argparse.Namespace, sink: AuditSink) -> int:
    from toolbox.audit._merkle import verify_consistency
    from toolbox.audit._note import open_checkpoint

    keys = _keys(args.public_key)
    old = open_checkpoint(_read_text(args.old, "the checkpoint"), keys)
    new = open_checkpoint(_read_text(args.new, "the checkpoint"), keys)
    if old.origin != new.origin or old.size > new.size:
        raise CliError("give two checkpoints of one log, the older first")
    proof = _merkle_log(sink).consistency(old.size, new.size)
    ok = verify_consistency(old.size, new.size, old.root, new.root, proof)
    document: Document = {
        "ok": ok,
        "old_size": old.size,
        "new_size": new.size,
        "consistency_path": [base64.b64encode(h).decode("ascii") for h in proof],
    }
    if args.json:
        emit_json(document)
    else:
        verdict = "only grew" if ok else "DOES NOT EXTEND the older one: rewritten history or a fork"
        emit_lines([f"{'OK' if ok else 'FAILED'}: the tree of {new.size} {verdict} (tree of {old.size})"])
    return EXIT_OK if ok else EXIT_UNUSABLE


# -- verify --witness ... --public-key ... --------------------------------------


def verify_against_witnesses(args: argparse.Namespace, sink: AuditSink, records: Sequence[Any]) -> list[Any]:
    # Any: the log problems join verify's chain problems in one report (both dataclasses, both printable).
    """The log problems of ``records`` and the store's log against every witness (verify's extra check)."""
    from toolbox.audit._log_verify import WitnessedNote, verify_log

    if not args.public_key:
        if args.witness_dir or args.witness_url_env or args.witness_http:
            raise CliError("--public-key is required to check the witnesses' checkpoints")
        return []
    if not args.witness_dir and not args.witness_url_env and not args.witness_http:
        raise CliError("name at least one witness: --witness-dir DIR or --witness-url-env VAR")
    if not args.origin:
        raise CliError("--origin is required with --public-key: the log's name in its checkpoints")
    keys = _keys(args.public_key)
    log = _merkle_log(sink)
    notes = [WitnessedNote(w.name, note) for w in _witnesses(args, keys, args.origin) for note in w.notes()]
    if not notes:
        raise CliError("the witnesses hold no checkpoint: run `toolbox audit checkpoint` first")
    return list(verify_log(records, log.entries(), notes, keys, origin=args.origin))
