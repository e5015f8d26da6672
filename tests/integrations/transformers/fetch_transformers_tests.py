"""Fetch transformers' model test suite for ``test_transformers_model_tester.py``.

    python tests/integrations/transformers/fetch_transformers_tests.py .venv/transformers-tests

``make setup`` runs it. transformers' wheel ships no tests; its source distribution on
PyPI, at the installed version, ships ``tests/test_modeling_common.py`` (the
``ModelTesterMixin`` every transformers model is tested with) and the mixins beside it.
They are unpacked, unchanged, as the package ``transformers_tests`` (ours is ``tests``).
Three modules they import are not in the source distribution; this writes stand-ins that
define the names they import and nothing more:

* ``exporters/test_export.py``: ``ExportTesterMixin`` without tests (no export checks);
* ``generation/test_utils.py``: ``GenerationTesterMixin`` without tests (our BERT does not
  generate);
* ``utils/test_configuration_utils.py``: ``config_common_kwargs`` empty (``ConfigTester``
  then checks the model's own keywords only).

Nothing is fetched again while the unpacked version matches the installed one.
:func:`use_suite` is how a test module imports it.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "transformers_tests"
DEFAULT = Path(__file__).resolve().parents[3] / ".venv" / "transformers-tests"
STAND_INS = {
    "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
    "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
    "utils/test_configuration_utils.py": "config_common_kwargs: dict = {}\n",
}
NOTE = '"""A stand-in: this module is not in transformers\' source distribution."""\n\n'


def fetch(dest: Path) -> Path:
    """Unpack the installed transformers' ``tests/*.py`` into ``dest/transformers_tests``."""
    version = importlib.metadata.version("transformers")
    package = dest / PACKAGE
    stamp = package / ".version"
    if stamp.is_file() and stamp.read_text().strip() == version:
        return package
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        subprocess.run(
            [*pip, "--no-binary", ":all:", f"transformers=={version}", "--dest", tmp], check=True
        )
        (sdist,) = Path(tmp).glob("transformers-*.tar.gz")
        package.mkdir(parents=True, exist_ok=True)
        prefix = f"transformers-{version}/tests/"
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                name = member.name.removeprefix(prefix)
                if member.isfile() and member.name.startswith(prefix) and "/" not in name:
                    source = archive.extractfile(member)
                    assert source is not None
                    (package / name).write_bytes(source.read())
    (package / "__init__.py").touch()
    for relative, text in STAND_INS.items():
        path = package / relative
        path.parent.mkdir(exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(NOTE + text)
    stamp.write_text(version + "\n")
    return package


def use_suite() -> None:
    """Make ``transformers_tests`` importable (from ``$PAPERPORTS_TRANSFORMERS_TESTS`` or
    the default folder), or skip the calling test module, saying how to fetch it; under CI
    (``$CI`` set) a missing suite is an error, not a skip."""
    import pytest

    where = Path(os.environ.get("PAPERPORTS_TRANSFORMERS_TESTS", DEFAULT))
    if not (where / PACKAGE / "test_modeling_common.py").is_file():
        reason = (
            f"transformers' test suite is not at {where}: `make setup` fetches it "
            "(tests/integrations/transformers/fetch_transformers_tests.py)"
        )
        if os.environ.get("CI"):
            raise RuntimeError(reason)
        pytest.skip(reason, allow_module_level=True)
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))


if __name__ == "__main__":
    print(fetch(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT))
