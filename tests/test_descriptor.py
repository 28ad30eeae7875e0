"""Descriptors: validation, defaults and error messages."""

import pytest
from pydantic import ValidationError

from toolbox import Acknowledgement, Effect, OperationDescriptor, RiskClass, ToolDescriptor
from toolbox.errors import InvalidDescriptorError
from toolbox.foundations._descriptor import validate_descriptor

VALID = {
    "name": "weather",
    "version": "1.0",
    "risk": "EXTERNAL_RESOURCE",
    "operations": [{"name": "forecast", "effect": "READ_ONLY"}],
}


def test_valid_mapping_validates():
    """A mapping with the required fields becomes a frozen descriptor."""
    desc = validate_descriptor(VALID, provider="acme")
    assert desc.risk is RiskClass.EXTERNAL_RESOURCE
    assert desc.effect_of("forecast") is Effect.READ_ONLY
    with pytest.raises(ValidationError):
        desc.name = "other"  # type: ignore[misc]


def test_risk_is_required():
    """There is no default risk class: leaving it out names the provider and the field."""
    raw = {k: v for k, v in VALID.items() if k != "risk"}
    with pytest.raises(InvalidDescriptorError, match=r"provider 'acme'.*field 'risk'"):
        validate_descriptor(raw, provider="acme")


@pytest.mark.parametrize("name", ["", "Weather", "1abc", "a" * 65, "we ather", "w/x"])
def test_bad_names_rejected(name):
    """Tool names follow ^[a-z][a-z0-9_.-]{0,63}$."""
    with pytest.raises(InvalidDescriptorError, match="field 'name'"):
        validate_descriptor({**VALID, "name": name}, provider="acme")


def test_unknown_field_rejected():
    """A typo in a descriptor field is an error, not ignored."""
    with pytest.raises(InvalidDescriptorError, match="field 'risk_class'"):
        validate_descriptor({**VALID, "risk_class": "MEMORY_ONLY"}, provider="acme")


def test_unknown_risk_rejected():
    """Risk classes are a closed set."""
    with pytest.raises(InvalidDescriptorError, match="field 'risk'"):
        validate_descriptor({**VALID, "risk": "HARMLESS"}, provider="acme")


def test_effect_defaults_to_unsafe():
    """An operation without a declared effect, or an unknown one, is UNSAFE."""
    assert OperationDescriptor(name="x").effect is Effect.UNSAFE
    assert Effect("SOMETHING_NEW") is Effect.UNSAFE
    desc = validate_descriptor(VALID, provider="acme")
    assert desc.effect_of("undeclared") is Effect.UNSAFE


def test_duplicate_operations_rejected():
    """Operation names are unique within a tool."""
    raw = {**VALID, "operations": [{"name": "a"}, {"name": "a"}]}
    with pytest.raises(InvalidDescriptorError, match="declared twice"):
        validate_descriptor(raw, provider="acme")


def test_operations_required():
    """A tool without operations is rejected."""
    with pytest.raises(InvalidDescriptorError, match="field 'operations'"):
        validate_descriptor({**VALID, "operations": []}, provider="acme")


@pytest.mark.parametrize("env", ["lower", "1ABC", "WITH-DASH", ""])
def test_acknowledgement_env_is_upper_snake(env):
    """Acknowledgement variables are UPPER_SNAKE_CASE."""
    with pytest.raises(ValidationError):
        Acknowledgement(env=env, value="yes")


def test_acknowledgement_value_rules():
    """Acknowledgement values are non-empty and printable."""
    with pytest.raises(ValidationError):
        Acknowledgement(env="ACK", value="")
    with pytest.raises(ValidationError):
        Acknowledgement(env="ACK", value="a\nb")


def test_non_mapping_descriptor_rejected():
    """A provider returning something that is not a descriptor gets a clear message."""
    with pytest.raises(InvalidDescriptorError, match="ToolDescriptor or a mapping"):
        validate_descriptor(["not", "a", "descriptor"], provider="acme")  # type: ignore[arg-type]


def test_error_message_does_not_echo_values():
    """Validation messages name fields, not the (possibly sensitive) input values."""
    raw = {**VALID, "summary": "s3cr3t-value" * 100}
    with pytest.raises(InvalidDescriptorError) as info:
        validate_descriptor(raw, provider="acme")
    assert "s3cr3t-value" not in str(info.value)


def test_descriptor_instance_is_validated_again():
    """A descriptor instance is validated again: an equal one comes back."""
    desc = ToolDescriptor.model_validate(VALID)
    assert validate_descriptor(desc, provider="acme") == desc
