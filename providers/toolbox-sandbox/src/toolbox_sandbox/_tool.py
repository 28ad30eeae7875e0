"""`SandboxTool`: Python code and programs run in an operating-system sandbox, one intent per call."""

from __future__ import annotations

from typing import Annotated, Any, Literal, final

from pydantic import Field

from toolbox import Effect, ToolRuntime, WriteIntent
from toolbox_sandbox._binding import files_digests, input_digest
from toolbox_sandbox._errors import SandboxDeniedError
from toolbox_sandbox._inputs import check_argv, check_files, check_source, check_stdin
from toolbox_sandbox._options import SandboxOptions, parse_options
from toolbox_sandbox._result import SandboxResult
from toolbox_sandbox._run import Request, execute

__all__ = ["SandboxTool"]

_Source = Annotated[str, Field(description="The Python code to run, as a file's text.")]
_Argv = Annotated[
    list[str], Field(min_length=1, description="The program's absolute path, then its arguments.")
]
_Stdin = Annotated[str, Field(description="Text given to the code on standard input.")]
_Files = Annotated[
    dict[str, str] | None,
    Field(description="Input files put in the working directory: relative path -> text content."),
]
_Profile = Annotated[str | None, Field(description="The sandbox profile; the default profile if omitted.")]


@final
class SandboxTool:
    """Run Python code or a listed program in a bubblewrap sandbox.

    ``PRIVILEGED``: it needs an explicit policy allow and the deployment
    acknowledgement ``TOOLBOX_SANDBOX_ACK=allow-sandboxed-code``. Each call runs
    in new namespaces (user, mount, PID, IPC, UTS, network, cgroup) over a
    read-only minimal root, with a private tmpfs working directory, an empty
    environment (the profile's variables only), no inherited descriptors,
    ``no_new_privs``, a seccomp filter where available and the profile's limits.
    The operations are ``UNSAFE`` unless every profile is declared
    ``read_only_world``; then they are ``IDEMPOTENT``. An approval binds the
    exact code (or argv), the digests of stdin and every file, and the profile.
    """

    __slots__ = ("_options", "_runtime")

    def __init__(self, runtime: ToolRuntime) -> None:
        """Build the tool from ``runtime.options``.

        Raises:
            ValueError: the options are invalid, the descriptor declares the operations
                ``IDEMPOTENT`` while a profile is not ``read_only_world``, or the options ask for
                ``require_approval`` the descriptor (built from the policy file) does not carry.
        """
        self._runtime = runtime
        self._options = parse_options(runtime.options)
        declared = runtime.effect_of("run_python")
        every_profile_read_only = all(p.read_only_world for p in self._options.profiles.values())
        if declared is not Effect.UNSAFE and not every_profile_read_only:
            raise ValueError(
                f"the sandbox operations are declared {declared.value} (from the policy file's profiles), "
                "but the profiles in effect are not all read_only_world; declare them in [tools.sandbox]"
            )
        approved = all(op.requires_approval for op in runtime.descriptor.operations)
        if self._options.require_approval and not approved:
            raise ValueError(
                "require_approval is read when the tool is registered, from the policy file's "
                "[tools.sandbox]: set it there (or add a REQUIRE_APPROVAL guardrail for tool 'sandbox')"
            )

    @property
    def options(self) -> SandboxOptions:
        """The validated options."""
        return self._options

    def run_python(
        self, source: _Source, stdin: _Stdin = "", files: _Files = None, profile: _Profile = None
    ) -> WriteIntent[SandboxResult]:
        """Intent to run the Python code ``source`` with the profile's Python; returns a `SandboxResult`.

        Raises:
            ValueError: an argument is invalid or over its cap, or the profile is unknown.
        """
        data = check_source(source, self._options)
        return self._intent(
            "run_python", mode="python", code=data, argv=(), stdin=stdin, files=files, profile=profile
        )

    def run(
        self, argv: _Argv, stdin: _Stdin = "", files: _Files = None, profile: _Profile = None
    ) -> WriteIntent[SandboxResult]:
        """Intent to run the program ``argv[0]`` (the profile's python or one of its ``programs``).

        Raises:
            SandboxDeniedError: the profile does not list the program (``SANDBOX_DENIED``).
            ValueError: an argument is invalid or over its cap, or the profile is unknown.
        """
        arguments = check_argv(argv)
        return self._intent(
            "run", mode="run", code=None, argv=arguments, stdin=stdin, files=files, profile=profile
        )

    def _intent(
        self,
        operation: str,
        *,
        mode: Literal["python", "run"],
        code: bytes | None,
        argv: tuple[str, ...],
        stdin: object,
        files: object,
        profile: object,
    ) -> WriteIntent[SandboxResult]:
        name = self._profile_name(profile)
        chosen = self._options.profiles[name]
        if argv and argv[0] not in (chosen.python, *chosen.programs):
            denial = SandboxDeniedError(
                f"profile {name!r} does not allow the program {argv[0]!r}; it allows "
                f"{', '.join((chosen.python, *chosen.programs))}",
                rule="sandbox:programs",
                tool=self._runtime.tool_name,
            )
            self._runtime.record_denial(denial)
            raise denial
        given = check_stdin(stdin)
        pairs = check_files(files, given, self._options)
        request = Request(
            tool=self._runtime.tool_name,
            bwrap=self._options.bwrap,
            profile_name=name,
            profile=chosen,
            mode=mode,
            code=code,
            argv=argv,
            stdin=given,
            files=pairs,
        )
        # What authorizers and guardrails decide on: the call as it is bound (the exact code or argv,
        # inputs by digest: `SANDBOX_BIND`), with the profile resolved (None is the default profile)
        # and its network, so a rule on a profile also matches calls that leave it to the default.
        what: dict[str, Any] = (
            {"argv": list(argv)} if code is None else {"source": code.decode("utf-8", "surrogatepass")}
        )
        arguments = {
            **what,
            "stdin": input_digest(given),
            "files": files_digests(dict(pairs)),
            "profile": name,
            "network": chosen.network,
        }
        return self._runtime.write_intent(
            operation, lambda: execute(request), target=f"sandbox/{name}", arguments=arguments
        )

    def _profile_name(self, profile: object) -> str:
        if profile is None:
            return self._options.default_profile
        if not isinstance(profile, str) or profile not in self._options.profiles:
            raise ValueError(f"profile must be one of {', '.join(sorted(self._options.profiles))}")
        return profile

    def __repr__(self) -> str:
        return f"SandboxTool(profiles={sorted(self._options.profiles)!r})"
