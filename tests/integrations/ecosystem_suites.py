"""Fetch the ecosystems' own test suites, to run them against our components.

    python tests/integrations/ecosystem_suites.py .venv/ecosystem-tests

``make setup`` runs it. The wheels ship no tests; each project's source distribution on
PyPI, at the installed version, ships its ``tests/*.py``. They are unpacked, unchanged, as a
package of their own (ours is ``tests``):

* ``transformers_tests``: transformers' ``tests/test_modeling_common.py`` (the
  ``ModelTesterMixin`` every transformers model is tested with) and the mixins beside it.
  Three modules they import are not in the source distribution; stand-ins define the names
  they import and nothing more: ``exporters/test_export.py`` (``ExportTesterMixin`` without
  tests: no export checks), ``generation/test_utils.py`` (``GenerationTesterMixin`` without
  tests: our BERT does not generate), ``utils/test_configuration_utils.py``
  (``config_common_kwargs`` empty: ``ConfigTester`` then checks the model's own keywords).
* ``sb3_contrib_tests``: sb3-contrib's tests, among them ``test_lstm.py``, the recurrent
  policies' tests.

Nothing is fetched again while an unpacked suite's version matches the installed one.
:func:`use_suite` is how a test module imports one.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2] / ".venv" / "ecosystem-tests"
ENVIRONMENT = "PAPERPORTS_ECOSYSTEM_TESTS"  # another folder than DEFAULT
NOTE = '"""A stand-in: this module is not in the source distribution."""\n\n'


@dataclass(frozen=True)
class Suite:
    """One project's tests: its distribution's name, the package they are unpacked as, a
    file that must be there, and the stand-ins to write."""

    distribution: str
    package: str
    sentinel: str
    stand_ins: dict[str, str] = field(default_factory=dict)


SUITES = {
    "transformers": Suite(
        "transformers",
        "transformers_tests",
        "test_modeling_common.py",
        {
            "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
            "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
            "utils/test_configuration_utils.py": "config_common_kwargs: dict = {}\n",
        },
    ),
    "sb3-contrib": Suite("sb3-contrib", "sb3_contrib_tests", "test_lstm.py"),
}


def fetch(name: str, dest: Path) -> Path:
    """Unpack the installed ``name``'s ``tests/*.py`` into ``dest/<its package>``."""
    suite = SUITES[name]
    version = importlib.metadata.version(suite.distribution)
    package = dest / suite.package
    stamp = package / ".version"
    if stamp.is_file() and stamp.read_text().strip() == version:
        return package
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        requirement = f"{suite.distribution}=={version}"
        subprocess.run([*pip, "--no-binary", ":all:", requirement, "--dest", tmp], check=True)
        (sdist,) = Path(tmp).glob("*.tar.gz")
        package.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as archive:
            members = archive.getmembers()
            prefix = members[0].name.split("/")[0] + "/tests/"  # <name>-<version>/tests/
            for member in members:
                relative = member.name.removeprefix(prefix)
                if member.isfile() and member.name.startswith(prefix) and "/" not in relative:
                    source = archive.extractfile(member)
                    assert source is not None
                    (package / relative).write_bytes(source.read())
    (package / "__init__.py").touch()
    for relative, text in suite.stand_ins.items():
        path = package / relative
        path.parent.mkdir(exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(NOTE + text)
    stamp.write_text(version + "\n")
    return package


def use_suite(name: str) -> None:
    """Make suite ``name`` importable (from ``$PAPERPORTS_ECOSYSTEM_TESTS`` or the default
    folder), or skip the calling test module, saying how to fetch it; under CI (``$CI`` set)
    a missing suite is an error, not a skip."""
    import pytest

    suite = SUITES[name]
    where = Path(os.environ.get(ENVIRONMENT, DEFAULT))
    if not (where / suite.package / suite.sentinel).is_file():
        reason = (
            f"{name}'s test suite is not at {where}: `make setup` fetches it "
            "(tests/integrations/ecosystem_suites.py)"
        )
        if os.environ.get("CI"):
            raise RuntimeError(reason)
        pytest.skip(reason, allow_module_level=True)
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    for suite_name in SUITES:
        print(fetch(suite_name, folder))
