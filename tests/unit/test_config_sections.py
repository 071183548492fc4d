"""The Config's sections: each field is a Config field of the same name and type, and
a section made from a Config carries that Config's values."""

import dataclasses
import typing

import pytest

from distributed_ac.config import schema
from distributed_ac.config.sections import SECTIONS

CONFIG = typing.get_type_hints(schema.Config)


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_a_section_names_config_fields_with_their_types(section):
    hints = typing.get_type_hints(section)
    for f in dataclasses.fields(section):
        assert f.name in CONFIG, f"{section.__name__}.{f.name} is no Config field"
        assert hints[f.name] == CONFIG[f.name], f.name


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_a_section_of_a_config_carries_its_values(section):
    base = schema.Config()
    changed = {}
    for f in dataclasses.fields(section):  # a value other than the default, per type
        value = getattr(base, f.name)
        changed[f.name] = (not value if isinstance(value, bool)
                           else value * 0.5 if isinstance(value, float)
                           else value + 3 if isinstance(value, int) else value)
    cfg = dataclasses.replace(base, **changed)
    got = section.of(cfg)
    assert {f.name: getattr(got, f.name) for f in dataclasses.fields(section)} == changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(got, dataclasses.fields(section)[0].name, 1)
