"""Finished training runs of ``paperports reproduce obsdrop``, kept on disk.

The full budget trains 33 agents for hours; a reproduction that stops (a closed session, a
killed job) starts again where it was: each finished run's measurements are written as soon
as it ends, and a later reproduction into the same folder reads them instead of training
again. A run's results depend only on its arguments, the budget, the code that trains and
measures it, and the library versions (every run is seeded and on one torch thread), so the
file's name is a hash of all of these: editing that code (what runs, not its comments or
docstrings), or upgrading torch or Stable-Baselines3, starts every run afresh instead of
mixing old results with new ones.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import paperports.adapters.cartpole_swingup
import paperports.adapters.observational_dropout
import paperports.integrations.sb3
from paperports.experiments.records import damaged as _damaged
from paperports.experiments.records import fingerprint, read_record, write_record

__all__ = ["RunCache", "code_fingerprint", "read_record", "write_record"]

# The libraries whose numerics the results depend on.
_LIBRARIES = ("torch", "numpy", "gymnasium", "stable-baselines3", "sb3-contrib")


def code_fingerprint(
    extra_files: tuple[Path, ...] = (), extra_libraries: tuple[str, ...] = ()
) -> str:
    """A hash of the code that trains and measures the agents (the sb3 integration but its
    Ray workers, which no reproduction runs; the swing-up and the dropout wrapper; and
    ``extra_files``) and of the library versions. The code is hashed as its syntax tree
    without docstrings, so that rewording a comment or a docstring, or reformatting, keeps
    the finished runs; any change to what runs starts them afresh. ``extra_libraries`` are
    hashed with their versions too."""
    sb3_dir = Path(paperports.integrations.sb3.__file__).parent
    files = [
        *sorted(f for f in sb3_dir.glob("*.py") if f.name != "workers.py"),
        Path(paperports.adapters.cartpole_swingup.__file__),
        Path(paperports.adapters.observational_dropout.__file__),
        *extra_files,
    ]
    return fingerprint(files, (*_LIBRARIES, *extra_libraries))


class RunCache:
    """Runs' results in ``folder``, one JSON file each (and the trained agent, where the
    result has one, as the ``.zip`` of its ``save`` beside it: ``RecurrentPPO.load`` or
    ``PPO.load`` reads it), named by the run, the budget and :func:`code_fingerprint`.

    Args:
        folder: Where the files go; created at the first save.
        budget: What else the results depend on (steps, episodes...), JSON-serialisable.
        fingerprint: The code and library fingerprint; :func:`code_fingerprint` for real
            runs.
    """

    def __init__(self, folder: Path, budget: dict[str, Any], fingerprint: str) -> None:
        self.folder = folder
        self.budget = budget
        self.fingerprint = fingerprint

    def path(self, run: Any) -> Path:
        """The JSON file of ``run`` (a dataclass instance) at this budget and code."""
        fields = asdict(run)
        key = json.dumps([fields, self.budget, self.fingerprint], sort_keys=True)
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        readable = "_".join(str(v) for k, v in fields.items() if k in ("kind", "p", "seed"))
        return self.folder / f"{readable}_{digest}.json"

    def load(self, run: Any) -> dict[str, Any] | None:
        """``run``'s saved result, or ``None`` if it has not finished at this budget and code.

        A damaged entry (a JSON file that does not parse, a missing agent, an agent ``.zip``
        that is not a zip or lacks a part SB3's ``load`` needs) counts as not finished: a
        ``RuntimeWarning`` names the file and what is wrong, and the run trains again."""
        path = self.path(run)
        if not path.exists():
            return None
        agent = path.with_suffix(".zip")
        result = read_record(path)
        if result is None:
            return None
        if "has_agent" not in result:
            _damaged(path, "it does not hold a result (no 'has_agent')")
            return None
        has_agent = bool(result.pop("has_agent"))
        if has_agent:
            problem = _agent_problem(agent)
            if problem is not None:
                _damaged(agent, problem)
                return None
        result["agent"] = agent.read_bytes() if has_agent else None
        return result

    def save(self, run: Any, result: dict[str, Any]) -> None:
        """Write ``result`` (its ``"agent"`` bytes, if any, to the ``.zip``); the JSON file
        is written last and renamed into place, so a killed process leaves no half result."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(run)
        agent = result.get("agent")
        if agent is not None:
            path.with_suffix(".zip").write_bytes(agent)
        fields = {k: v for k, v in result.items() if k != "agent"}
        write_record(path, fields | {"has_agent": agent is not None})


_AGENT_PARTS = ("data", "policy.pth", "policy.optimizer.pth")
"""What SB3's ``save`` writes into its zip and its ``load`` reads back."""


def _agent_problem(agent: Path) -> str | None:
    """What is wrong with a saved agent's zip, or ``None``."""
    if not agent.is_file():
        return "the agent's zip is missing"
    if not zipfile.is_zipfile(agent):
        return "the agent's file is not a zip (empty or truncated?)"
    with zipfile.ZipFile(agent) as archive:
        missing = [part for part in _AGENT_PARTS if part not in archive.namelist()]
    if missing:
        return f"the agent's zip lacks {missing}, which SB3's load needs"
    return None
