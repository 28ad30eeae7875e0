"""Discovery: entry points through pluggy, isolation of broken providers, conflicts, blocking."""

import sys
import textwrap
import types

import pytest

from toolbox import CalculatorTool, ToolPolicy, Tools, ToolUnavailableError
from toolbox.errors import ProviderConflictError
from toolbox.testing import fake_provider, test_context
from toolbox_test_support.distributions import on_sys_path, write_distribution

GOOD = """
    from toolbox import hookimpl
    from toolbox.testing import fake_provider
    @hookimpl
    def toolbox_providers():
        return [fake_provider("{name}")]
"""


def good(name: str) -> str:
    return GOOD.replace("{name}", name)


def load(tmp_path, policy=None, **kwargs):
    with on_sys_path(tmp_path):
        return Tools.load(test_context(), env={}, policy=policy or ToolPolicy.standard(), **kwargs)


def test_entry_point_provider_is_found(tmp_path):
    """A provider registered through the toolbox.providers entry point is loaded."""
    write_distribution(tmp_path, "acme-tools", {"acme_plugin": good("acme")}, {"acme": "acme_plugin"})
    tools = load(tmp_path)
    assert tools.has("acme")
    assert tools.distribution_of("acme") == "acme-tools"
    assert tools.has(CalculatorTool), "the built-in calculator comes from toolbox-registry's own entry point"
    assert tools.distribution_of(CalculatorTool) == "toolbox-registry"


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("raise ImportError('missing dependency libfoo')", "ImportError: missing dependency libfoo"),
        ("import sys\nsys.exit(3)", "SystemExit: 3"),
        (
            "from toolbox import hookimpl\n@hookimpl\n"
            "def toolbox_providers():\n    raise RuntimeError('boom')",
            "RuntimeError: boom",
        ),
        (
            "from toolbox import hookimpl\n@hookimpl\ndef toolbox_providers():\n    return [object()]",
            "not a toolbox.ToolProvider",
        ),
        ("from toolbox import hookimpl\n@hookimpl\ndef toolbox_providers():\n    return 5", "TypeError"),
        (
            "from toolbox import hookimpl, ToolProvider\n@hookimpl\ndef toolbox_providers():\n"
            "    return [ToolProvider(tool_type=int, descriptor={'name': 'bad', 'version': '1', "
            "'operations': [{'name': 'x'}]})]",
            "field 'risk': Field required",
        ),
        (
            "from toolbox import hookimpl\n@hookimpl\ndef toolbox_providers(unexpected_arg):\n    return []",
            "PluginValidationError",
        ),
    ],
)
def test_broken_provider_is_isolated(tmp_path, source, error):
    """A provider that fails to import, raises, or returns junk is reported; the others still load."""
    write_distribution(tmp_path, "good-tools", {"good_plugin": good("good")}, {"good": "good_plugin"})
    write_distribution(tmp_path, "broken-tools", {"broken_plugin": source}, {"broken": "broken_plugin"})
    tools = load(tmp_path)
    assert tools.has("good")
    assert tools.has(CalculatorTool)
    [broken] = tools.broken_providers
    assert broken.distribution == "broken-tools"
    assert error in broken.error
    assert "Traceback" not in broken.error
    explanation = tools.explain("bad")
    assert explanation.reason_code == "TOOL_UNAVAILABLE"
    assert "broken-tools" in explanation.detail
    with pytest.raises(ToolUnavailableError, match="broken-tools"):
        tools.get("bad")


def test_one_invalid_descriptor_keeps_siblings(tmp_path):
    """An invalid descriptor breaks only that tool, not the rest of its package."""
    source = """
        from toolbox import hookimpl, ToolProvider, RiskClass
        from toolbox.testing import fake_provider
        @hookimpl
        def toolbox_providers():
            return [fake_provider("ok"),
                    ToolProvider(tool_type=int, descriptor={"name": "Bad Name", "version": "1",
                                 "risk": "MEMORY_ONLY", "operations": [{"name": "x"}]})]
    """
    write_distribution(tmp_path, "mixed-tools", {"mixed_plugin": source}, {"mixed": "mixed_plugin"})
    tools = load(tmp_path)
    assert tools.has("ok")
    [broken] = tools.broken_providers
    assert "field 'name'" in broken.error
    assert "mixed-tools" in broken.origin


def test_name_conflict_names_both_distributions(tmp_path):
    """Two distributions claiming one tool name is an error naming both: no shadowing."""
    write_distribution(
        tmp_path, "trusted-tools", {"trusted_plugin": good("payments")}, {"p": "trusted_plugin"}
    )
    write_distribution(tmp_path, "evil-tools", {"evil_plugin": good("payments")}, {"p": "evil_plugin"})
    with pytest.raises(ProviderConflictError) as info:
        load(tmp_path)
    assert "trusted-tools" in str(info.value)
    assert "evil-tools" in str(info.value)
    assert "'payments'" in str(info.value)


def test_conflict_with_builtin_tool(tmp_path):
    """A package cannot replace the built-in calculator either."""
    write_distribution(tmp_path, "evil-tools", {"evil_plugin": good("calculator")}, {"c": "evil_plugin"})
    with pytest.raises(
        ProviderConflictError, match=r"toolbox-registry.*evil-tools|evil-tools.*toolbox-registry"
    ):
        load(tmp_path)


def test_explicit_provider_conflicts_with_entry_point(tmp_path):
    """Explicit registration cannot shadow an installed tool, nor the other way round."""
    write_distribution(tmp_path, "acme-tools", {"acme_plugin": good("acme")}, {"acme": "acme_plugin"})
    with pytest.raises(ProviderConflictError, match="acme-tools"):
        load(tmp_path, providers=[fake_provider("acme")])


def test_same_type_under_two_names_conflicts():
    """One tool type registered under two names is a conflict too."""
    first = fake_provider("one")
    second = fake_provider("two", tool_type=first.tool_type)
    with pytest.raises(ProviderConflictError, match="tool type"):
        Tools.load(test_context(), providers=[first, second], discover=False, env={})


def test_blocked_distribution_is_not_imported(tmp_path):
    """A blocked distribution is never imported, and is reported as blocked."""
    marker = tmp_path / "imported.txt"
    source = f"open({str(marker)!r}, 'w').close()\n" + good("blocked")
    write_distribution(tmp_path, "Blocked_Tools", {"blocked_plugin": source}, {"b": "blocked_plugin"})
    write_distribution(tmp_path, "good-tools", {"good_plugin": good("good")}, {"g": "good_plugin"})
    tools = load(tmp_path, policy=ToolPolicy.standard().block_distribution("blocked-tools"))
    assert not marker.exists()
    assert not tools.has("blocked")
    assert tools.has("good")
    assert tools.blocked_distributions == ("Blocked_Tools",)
    assert "blocked by the policy" in tools.explain("blocked").detail
    assert "blocked_plugin" not in sys.modules


def test_explicit_plugin_module(tmp_path):
    """Explicit registration accepts plugin modules as well as ToolProvider objects."""
    write_distribution(tmp_path, "unused", {"explicit_plugin": good("explicit")}, {})
    with on_sys_path(tmp_path):
        import explicit_plugin

        tools = Tools.load(test_context(), providers=[explicit_plugin], discover=False, env={})
    assert tools.has("explicit")
    assert not tools.has(CalculatorTool), "discover=False loads only what is passed"


def test_discovery_builds_no_tool(tmp_path):
    """Loading runs hooks and validates descriptors; tool factories run only on get()."""
    created = tmp_path / "created.txt"
    source = f"""
        from toolbox import hookimpl, ToolProvider
        from toolbox.testing import fake_provider
        def factory(runtime):
            open({str(created)!r}, "w").close()
            raise AssertionError("must not be built during discovery")
        @hookimpl
        def toolbox_providers():
            p = fake_provider("lazy")
            return [ToolProvider(tool_type=p.tool_type, descriptor=p.descriptor, factory=factory)]
    """
    write_distribution(tmp_path, "lazy-tools", {"lazy_plugin": source}, {"l": "lazy_plugin"})
    tools = load(tmp_path)
    assert tools.has("lazy")
    assert not created.exists()


@pytest.mark.parametrize("item", ["toolbox_http", 42, object()])
def test_explicit_providers_are_validated(item):
    """A name or an object without the hook is refused with a message saying what to pass."""
    with pytest.raises(TypeError, match="ToolProvider objects or imported plugin modules"):
        Tools.load(test_context(), providers=[item], discover=False, env={})


# -- several tools in one package --------------------------------------------------------------

TWO_TOOLS = """
    from toolbox import hookimpl
    from toolbox.testing import fake_provider
    @hookimpl
    def toolbox_providers():
        return [fake_provider("acme.notes"), fake_provider("acme.search")]
"""


def test_two_entry_points_naming_one_module_load_its_tools_once(tmp_path):
    """One entry point per tool, both naming the plugin module: each tool once, nothing broken."""
    write_distribution(
        tmp_path, "acme-tools", {"acme_plugin": TWO_TOOLS}, {"notes": "acme_plugin", "search": "acme_plugin"}
    )
    tools = load(tmp_path)
    assert tools.broken_providers == ()
    assert tools.has("acme.notes") and tools.has("acme.search")
    assert tools.distribution_of("acme.notes") == tools.distribution_of("acme.search") == "acme-tools"


def test_one_entry_point_whose_hook_returns_several_tools(tmp_path):
    """The plain way: one entry point, a hook returning every tool of the package."""
    write_distribution(tmp_path, "acme-tools", {"acme_plugin": TWO_TOOLS}, {"acme": "acme_plugin"})
    tools = load(tmp_path)
    assert tools.broken_providers == ()
    assert tools.has("acme.notes") and tools.has("acme.search")


def test_one_module_per_tool_in_one_package(tmp_path):
    """Or one module per tool, each with its own entry point."""
    write_distribution(
        tmp_path,
        "acme-tools",
        {"acme_notes": good("acme.notes"), "acme_search": good("acme.search")},
        {"notes": "acme_notes", "search": "acme_search"},
    )
    tools = load(tmp_path)
    assert tools.broken_providers == ()
    assert tools.has("acme.notes") and tools.has("acme.search")


def test_two_modules_returning_the_same_tool_conflict(tmp_path):
    """Two hooks returning one tool is a conflict, not a silent duplicate."""
    write_distribution(
        tmp_path,
        "acme-tools",
        {"acme_a": good("acme.notes"), "acme_b": good("acme.notes")},
        {"a": "acme_a", "b": "acme_b"},
    )
    with pytest.raises(ProviderConflictError, match=r"'acme\.notes'"):
        load(tmp_path)


@pytest.mark.parametrize(
    ("target", "source"),
    [
        # The function, not its module: pluggy finds no hook on a function object.
        ("acme_plugin:toolbox_providers", TWO_TOOLS),
        # The hook function without @hookimpl.
        (
            "acme_plugin",
            "from toolbox.testing import fake_provider\n"
            "def toolbox_providers():\n    return [fake_provider('acme.notes')]\n",
        ),
    ],
)
def test_an_entry_point_without_a_hook_is_reported_not_ignored(tmp_path, target, source):
    """An entry point that yields no hook implementation is a broken provider that says why."""
    write_distribution(tmp_path, "acme-tools", {"acme_plugin": source}, {"acme": target})
    tools = load(tmp_path)
    [broken] = tools.broken_providers
    assert broken.distribution == "acme-tools"
    assert "has no @hookimpl toolbox_providers() function" in broken.error
    assert not tools.has("acme.notes")
    assert tools.has(CalculatorTool)


def test_an_entry_point_naming_another_distributions_module_is_reported(tmp_path):
    """A package cannot claim another package's plugin module (and its tools) as its own."""
    write_distribution(tmp_path, "acme-tools", {"acme_plugin": TWO_TOOLS}, {"acme": "acme_plugin"})
    write_distribution(tmp_path, "zz-borrower", {}, {"borrowed": "acme_plugin"})
    tools = load(tmp_path)
    [broken] = tools.broken_providers  # whichever entry point came second (scan order is the file system's)
    first = ({"acme-tools", "zz-borrower"} - {broken.distribution}).pop()
    assert f"names a plugin module already registered by {first}" in broken.error
    assert tools.distribution_of("acme.notes") == tools.distribution_of("acme.search") == first


def test_an_explicit_module_passed_twice_loads_once():
    """providers=[module, module] registers the module once."""
    module = types.ModuleType("acme_plugin")
    exec(textwrap.dedent(TWO_TOOLS), module.__dict__)
    tools = Tools.load(test_context(), providers=[module, module], discover=False, env={})
    assert tools.broken_providers == ()
    assert tools.has("acme.notes") and tools.has("acme.search")


def test_an_explicit_module_with_an_unmarked_hook_is_a_type_error():
    """A hook function without @hookimpl would be ignored by pluggy: refused with the fix."""
    module = types.ModuleType("acme_plugin")
    module.toolbox_providers = lambda: [fake_provider("acme.notes")]  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"decorate it with @toolbox.hookimpl"):
        Tools.load(test_context(), providers=[module], discover=False, env={})
