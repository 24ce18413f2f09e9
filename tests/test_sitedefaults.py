"""A profile's table for an engine's jobs ([slurm] ...) is found by the engine's registry name
(gpuops.sitedefaults): a new engine's table is a module there, and gpuops.profiles names none."""

import dataclasses
import sys

import pytest

from gpuops import engines, errors, profiles, sitedefaults, tomlschema

SHIPPED = (profiles.SHIPPED_DIR / "generic-ssh.toml").read_text()


def test_each_table_is_a_registered_engines_and_defaults_flags_of_that_engine():
    fields = {f.name for f in dataclasses.fields(profiles.Profile)}
    assert sitedefaults.tables()  # Slurm's, at least
    for name, table in sitedefaults.tables().items():
        assert name in engines.names() and name not in fields
        assert {f.name for f in dataclasses.fields(table)} <= set(engines.get(name).flags)
        assert table.__doc__.strip() and all(f.default == "" for f in dataclasses.fields(table))


POD_TABLE = '''"""A fourth engine's table."""
import dataclasses


@dataclasses.dataclass(frozen=True)
class Pods:
    """a fourth engine's defaults"""

    namespace: str = dataclasses.field(default="", metadata={"doc": "where its jobs go"})


TABLE = Pods
'''


def test_a_fourth_engines_table_is_a_module_and_loads_shows_and_is_documented(tmp_path, monkeypatch):
    """Its module beside Slurm's and nothing else: the profile loads its [pods], shows it where the
    file has it, documents it, and gives it to no other engine."""
    extra = tmp_path / "tables"
    extra.mkdir()
    (extra / "pods.py").write_text(POD_TABLE)
    monkeypatch.setattr(sitedefaults, "__path__", list(sitedefaults.__path__) + [str(extra)])
    monkeypatch.delitem(sys.modules, "gpuops.sitedefaults.pods", raising=False)
    path = tmp_path / "site.toml"
    path.write_text(SHIPPED + '\n[pods]\nnamespace = "train"\n')
    site = profiles.load_file(path)
    assert site.engines["pods"].namespace == "train" and site.engines["slurm"] == sitedefaults.tables()["slurm"]()
    shown = tomlschema.plain(site)
    assert shown["pods"] == {"namespace": "train"} and "engines" not in shown and list(shown)[-2:] == ["pods", "slurm"]
    assert "| `pods.namespace` | string |  | where its jobs go |" in profiles.schema_markdown()
    assert engines.get("slurm").profile_defaults(site) == {}
    sys.modules.pop("gpuops.sitedefaults.pods", None)


def test_a_mistake_in_an_engines_table_names_its_line_and_key(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text(SHIPPED + '\n[slurm]\npartiton = "gpu"\n')
    line = len(SHIPPED.splitlines()) + 3
    said = rf"site.toml:{line}: slurm.partiton: unknown key \(allowed here: account"
    with pytest.raises(errors.UsageError, match=said):
        profiles.load_file(path)
    path.write_text('slurm = "gpu"\n' + SHIPPED)
    with pytest.raises(errors.UsageError, match=r"site.toml:1: slurm: expected a table, got"):
        profiles.load_file(path)
