"""Each integration names its extra when its ecosystem is missing; the core needs neither."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from paperports._imports import MissingExtraError

EXTRAS = [
    ("pyg", "torch_geometric"),
    ("sb3", "stable_baselines3"),
    ("sb3", "gymnasium"),
    ("transformers", "transformers"),
    ("transformers", "accelerate"),
    ("foolbox", "foolbox"),
    ("foolbox", "eagerpy"),
]


@pytest.mark.parametrize(("extra", "dependency"), EXTRAS)
def test_missing_ecosystem_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, extra: str, dependency: str
) -> None:
    module = f"paperports.integrations.{extra}"
    monkeypatch.setitem(sys.modules, dependency, None)  # makes `import dependency` fail
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=rf'pip install "paperports\[{extra}\]"') as info:
        importlib.import_module(module)
    assert isinstance(info.value, MissingExtraError)
    assert dependency in str(info.value)


@pytest.mark.parametrize(
    ("extra", "public"),
    [
        ("pyg", "GatedGraphConv"),
        ("sb3", "ObservationalDropoutPolicy"),
        ("transformers", "BertModel"),
        ("foolbox", "SaliencyMapAttack"),
        ("torch", "BNLSTM"),
    ],
)
def test_integrations_import_when_installed(extra: str, public: str) -> None:
    """Each integration imports and exports what its __all__ names, the plugin among them."""
    module = importlib.import_module(f"paperports.integrations.{extra}")
    assert public in module.__all__
    for name in module.__all__:
        assert getattr(module, name).__module__.startswith("paperports."), name


def test_core_imports_without_any_ecosystem() -> None:
    blocked = [
        "torch_geometric",
        "stable_baselines3",
        "sb3_contrib",
        "gymnasium",
        "transformers",
        "foolbox",
        "eagerpy",
        "matplotlib",
        "sklearn",
        "tqdm",
        "art",
    ]
    code = (
        "import sys\n"
        f"for m in {blocked!r}: sys.modules[m] = None\n"
        "import paperports, paperports.cli, paperports.registry, paperports.adapters\n"
        "import paperports.integrations, paperports.integrations.torch\n"
        "from paperports.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
