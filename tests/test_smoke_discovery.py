from toolbox import CalculatorTool, Tools
from toolbox.testing import test_context
from toolbox_test_support.distributions import on_sys_path, write_distribution


def test_fake_distribution_is_discovered(tmp_path):
    write_distribution(
        tmp_path,
        "acme-tools",
        {"acme_plugin": """
            from toolbox import ToolProvider, hookimpl
            from toolbox.testing import fake_provider
            @hookimpl
            def toolbox_providers():
                return [fake_provider("acme")]
        """},
        {"acme": "acme_plugin"},
    )
    with on_sys_path(tmp_path):
        tools = Tools.load(test_context(), env={})
    assert tools.has("acme")
    assert tools.distribution_of("acme") == "acme-tools"
    assert tools.has(CalculatorTool)
