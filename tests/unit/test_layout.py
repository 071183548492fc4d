"""The package's imports go one way: no module imports one that imports it back (the
layers between packages are import-linter's contracts in pyproject.toml, run by CI)."""

import grimp
from helpers import python
from paths import ROOT


def test_no_module_of_the_package_is_in_an_import_cycle():
    graph = grimp.build_graph("distributed_ac")
    cycles = [(a, b) for a in sorted(graph.modules)
              for b in sorted(graph.find_modules_directly_imported_by(a))
              if graph.chain_exists(importer=b, imported=a)]
    assert not cycles, cycles


def test_the_layer_contracts_hold():
    # In a child: import-linter's CLI reconfigures logging, which would disable every
    # logger this test process has already made.
    out = python("-c", "from importlinter.cli import lint_imports; "
                 "raise SystemExit(lint_imports())", cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:]
