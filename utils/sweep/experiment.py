"""The experiment file: reading it, checking every key, and the values it holds (``Experiment``)."""
from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cli import count, seed_list
from ..errors import UsageError
from ..io import file_in_the_way
from ..naming import SCRIPT_POLICIES, script_of

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository: relative results_dir are relative to it

POLICIES = [p for policies in SCRIPT_POLICIES.values() for p in policies]

TOP_KEYS = {"description", "envs", "policies", "seeds", "settings", "steps", "start_steps", "eval_freq",
            "eval_episodes", "flags", "threads_per_run", "gpus_per_run", "device", "seeds_per_run"}
REQUIRED_KEYS = ("envs", "policies", "seeds", "settings", "steps")
SETTING_KEYS = {"description", "results_dir", "flags", "policies", "steps"}
# flags the sweep sets itself: giving them in `flags` would contradict the grid or the skip logic
RESERVED_FLAGS = {
    "policy": "list policies under 'policies'", "env": "list environments under 'envs'",
    "seed": "list seeds under 'seeds'", "seeds": "list seeds under 'seeds'",
    "results_dir": "give each setting a 'results_dir'",
    "max_time_steps": "use the top-level 'steps'", "num_steps": "use the top-level 'steps'",
    "start_time_steps": "use the top-level 'start_steps'", "start_steps": "use the top-level 'start_steps'",
    "eval_freq": "use the top-level 'eval_freq'", "eval_episodes": "use the top-level 'eval_episodes'",
    "threads": "use the top-level 'threads_per_run'", "device": "use the top-level 'device'",
    "resume": "the sweep always passes --resume", "quiet": "the sweep always passes --quiet",
    "overwrite": "the sweep always passes --resume; to start runs over, delete their results",
    "help": "not a run flag",
}


class ExperimentError(Exception):
    """A bad experiment file: one line saying what to change."""


@dataclass
class Experiment:
    """A validated experiment file, before it is expanded into runs."""

    path: Path
    envs: list[str]
    policies: list[str]
    seeds: list[int]
    settings: dict[str, tuple[str, dict[str, Any]]]  # name -> (results_dir, flags merged with the global ones)
    steps: int
    start_steps: int
    eval_freq: int
    eval_episodes: int | None
    threads_per_run: int | None
    gpus_per_run: float
    device: str | None
    notices: list[str]
    # seeds trained by one process (None: all of them): 1 makes each seed a run of its own, which finishes, and can
    # be kept, on its own (a cluster's time limit, a machine lent for hours); a seed's curves are the same either way
    seeds_per_run: int | None = None
    # per setting, what it overrides of the file's grid: "policies" (a list) and "steps" (per agent)
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    def policies_of(self, setting: str) -> list[str]:
        return self.overrides.get(setting, {}).get("policies", self.policies)

    def steps_of(self, setting: str) -> int:
        return self.overrides.get(setting, {}).get("steps", self.steps)


def _integer(value: Any, what: str) -> int:
    """An integer from YAML: 1000000, 1_000_000, 1.0e+6, or the strings '1e6' / '1_000_000'."""
    if isinstance(value, bool):
        raise ExperimentError(f"{what}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    try:  # the command lines' own integer parsing: 1e6, 1_000_000, 1.0e+6
        return count(str(value)) if isinstance(value, (float, str)) else count("")
    except argparse.ArgumentTypeError:
        raise ExperimentError(f"{what}: expected an integer, got {value!r}") from None


def positive(value: Any, what: str, minimum: int = 1) -> int:
    number = _integer(value, what)
    if number < minimum:
        raise ExperimentError(f"{what}: must be {'positive' if minimum == 1 else f'>= {minimum}'}, got {number}")
    return number


def _names(value: Any, what: str) -> list[str]:
    """A non-empty list of distinct strings (a single string counts as a list of one)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
        raise ExperimentError(f"{what}: expected a non-empty list of names, got {value!r}")
    repeated = sorted({x for x in items if items.count(x) > 1})
    if repeated:
        raise ExperimentError(f"{what}: {', '.join(repeated)} listed twice")
    return list(items)


def parse_seeds(value: Any) -> list[int]:
    """Seeds as a list ([0, 1, 2]), a number, or a string of numbers and ranges ("0-9", "0-4 7 9"): the
    command lines' --seeds parsing of the same tokens, sorted."""
    items = value if isinstance(value, list) else [value]
    tokens: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise ExperimentError(f"seeds: expected numbers or ranges like \"0-9\", got {item!r}")
        tokens += [str(item)] if isinstance(item, int) else [t for t in re.split(r"[\s,]+", item) if t]
    if not tokens:
        raise ExperimentError("seeds: no seed given")
    try:
        return sorted(seed_list(tokens))
    except UsageError as e:
        raise ExperimentError(f"seeds: {str(e).removeprefix('--seeds').lstrip(': ')}") from None


def seed_tokens(seeds: Sequence[int]) -> list[str]:
    """Seeds as --seeds tokens: runs of three or more consecutive seeds become LOW-HIGH ("0-9")."""
    tokens: list[str] = []
    ordered = sorted(seeds)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            tokens.append(f"{ordered[i]}-{ordered[j]}")
        else:
            tokens.extend(str(s) for s in ordered[i:j + 1])
        i = j + 1
    return tokens


def _flags(value: Any, what: str) -> dict[str, Any]:
    """A mapping of flag names (with or without leading dashes) to YAML scalars or lists of them."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExperimentError(f"{what}: expected a mapping of flag names to values, got {value!r}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = str(key).lstrip("-")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            raise ExperimentError(f"{what}: {key!r} is not a flag name")
        if name in RESERVED_FLAGS:
            raise ExperimentError(f"{what}: --{name} is set by the sweep; {RESERVED_FLAGS[name]}")
        if isinstance(item, list):  # a flag taking several values: a non-empty list of numbers or strings
            ok = bool(item) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in item)
        else:  # true/false switch a store_true flag on/off; null is a mistake, not "no value"
            ok = isinstance(item, (str, int, float, bool))
        if not ok:
            raise ExperimentError(f"{what}: --{name} needs a value (a number, a string, true/false or a list), "
                                  f"got {item!r}")
        out[name] = item
    return out


def flag_args(flags: dict[str, Any]) -> list[str]:
    """Flags as command-line tokens: true -> --flag, false -> nothing, lists -> --flag a b."""
    out: list[str] = []
    for name, value in flags.items():
        if value is True:
            out.append(f"--{name}")
        elif value is False:
            continue
        elif isinstance(value, list):
            out.extend([f"--{name}", *(str(v) for v in value)])
        else:
            out.extend([f"--{name}", str(value)])
    return out


def _resolve_env(name: str) -> tuple[str, str | None]:
    """The Gymnasium id the command lines would run for this name, and their notice when it was mapped."""
    from ..envs.registry import resolve_env_id  # imports gymnasium: only when a file is read

    try:
        return resolve_env_id(name)
    except UsageError as e:
        raise ExperimentError(f"envs: {str(e).removeprefix('--env: ')}") from None


def load_experiment(path: str | Path) -> Experiment:
    """Read and check an experiment file; raises ExperimentError with a one-line reason."""
    path = Path(path)
    return experiment_from_spec(_read(path), path)


def experiment_from_spec(spec: dict, path: str | Path) -> Experiment:
    """Check an experiment given as the mapping a file holds (``utils.compare`` builds them from its suites); raises
    ExperimentError with a one-line reason."""
    path = Path(path)
    _check_keys(spec)  # checked in the order of the file's description: the first problem is the one reported
    notices: list[str] = []
    policies = _policies(spec["policies"])
    envs = _environments(spec["envs"], notices)
    seeds = parse_seeds(spec["seeds"])
    steps = positive(spec["steps"], "steps")
    start_steps = positive(spec.get("start_steps", 25_000), "start_steps", minimum=0)
    eval_freq = positive(spec.get("eval_freq", 1000), "eval_freq")
    if eval_freq > steps:
        raise ExperimentError(f"eval_freq {eval_freq} is larger than steps {steps}")
    if start_steps >= steps:
        notices.append(f"note: start_steps {start_steps} >= steps {steps}: the runs act randomly and never train")
    eval_episodes = positive(spec["eval_episodes"], "eval_episodes") if "eval_episodes" in spec else None
    threads = positive(spec["threads_per_run"], "threads_per_run") if "threads_per_run" in spec else None
    gpus, device = _gpus(spec.get("gpus_per_run", 0)), _device(spec.get("device"))
    per_run = positive(spec["seeds_per_run"], "seeds_per_run") if "seeds_per_run" in spec else None
    settings = _settings(spec["settings"], _flags(spec.get("flags"), "flags"), policies)
    overrides: dict[str, dict[str, Any]] = {}
    for name, body in spec["settings"].items():
        where = f"settings.{name}"
        if "policies" in body:
            overrides.setdefault(name, {})["policies"] = _policies(body["policies"], where + ".policies")
        if "steps" in body:
            own = positive(body["steps"], where + ".steps")
            if eval_freq > own:
                raise ExperimentError(f"{where}.steps {own} is smaller than eval_freq {eval_freq}")
            overrides.setdefault(name, {})["steps"] = own
    return Experiment(path=path, envs=envs, policies=policies, seeds=seeds, settings=settings, steps=steps,
                      start_steps=start_steps, eval_freq=eval_freq, eval_episodes=eval_episodes,
                      threads_per_run=threads, gpus_per_run=gpus, device=device, notices=notices,
                      overrides=overrides, seeds_per_run=per_run)


def _read(path: Path) -> Any:
    """The file's YAML (its keys are checked by ``experiment_from_spec``)."""
    return read_yaml(path, "experiment file", ExperimentError)[1]


def _unique_keys_loader():
    """YAML's safe loader, refusing a mapping that repeats a key (the safe loader keeps the last silently: a second
    method or baseline line would replace the first without a word)."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is repeated",
                                                            key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeys


def read_yaml(path: Path, what: str, error: type[Exception]) -> tuple[str, Any]:
    """A YAML file's text and content; what keeps it from being read or parsed (a repeated key included) is ``error``
    in one line (the file is named ``what``: "experiment file", "suite file")."""
    import yaml

    try:
        text = path.read_text()
    except OSError as e:
        raise error(f"cannot read the {what}: {e.strerror or e}") from None
    try:
        return text, yaml.load(text, Loader=_unique_keys_loader())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise error(f"not valid YAML{where}: {problem}") from None


def _check_keys(spec: Any) -> None:
    """A mapping with only known keys and every required one."""
    if not isinstance(spec, dict):
        raise ExperimentError("expected a mapping with keys " + ", ".join(REQUIRED_KEYS))
    unknown = sorted(str(k) for k in spec if k not in TOP_KEYS)
    if unknown:
        raise ExperimentError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(TOP_KEYS))}")
    missing = [k for k in REQUIRED_KEYS if k not in spec]
    if missing:
        raise ExperimentError(f"missing key(s) {', '.join(missing)}")


def _policies(value: Any, what: str = "policies") -> list[str]:
    policies = _names(value, what)
    for policy in policies:
        if script_of(policy) is None:
            raise ExperimentError(f"{what}: unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    return policies


def _environments(value: Any, notices: list[str]) -> list[str]:
    """The Gymnasium ids the command lines would run (-v2 mapped, with their notice added to ``notices``)."""
    envs: list[str] = []
    for name in _names(value, "envs"):
        env, notice = _resolve_env(name)
        if notice:
            notices.append(notice)
        if env in envs:
            raise ExperimentError(f"envs: {name} runs {env}, which is already listed")
        envs.append(env)
    return envs


def _gpus(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ExperimentError(f"gpus_per_run: expected a number >= 0 (a share of one GPU, e.g. 0.25), got {value!r}")
    return float(value)


def _device(value: Any) -> str | None:
    if value is not None and not (isinstance(value, str) and re.fullmatch(r"cpu|cuda(:\d+)?", value)):
        raise ExperimentError(f"device: expected cpu, cuda or cuda:N, got {value!r}")
    return value


def _settings(raw: Any, common: dict[str, Any], policies: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (results_dir, the file's flags overridden by the setting's). Settings share a folder only when no
    policy runs in both (file names start with the policy: TD3_... and DASE_TD3_... never meet)."""
    if not isinstance(raw, dict) or not raw:
        raise ExperimentError("settings: expected a mapping of setting names to {results_dir: ..., flags: {...}}")
    settings: dict[str, tuple[str, dict[str, Any]]] = {}
    folders: dict[str, list[tuple[str, set[str]]]] = {}
    for name, body in raw.items():
        where = f"settings.{name}"
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise ExperimentError(f"settings: {name!r} is not a usable name (letters, digits, _ . -)")
        if not isinstance(body, dict):
            raise ExperimentError(f"{where}: expected a mapping with results_dir (and optionally flags)")
        unknown = sorted(str(k) for k in body if k not in SETTING_KEYS)
        if unknown:
            raise ExperimentError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                                  f"{', '.join(sorted(SETTING_KEYS))}")
        results_dir = body.get("results_dir")
        if not isinstance(results_dir, str) or not results_dir.strip():
            raise ExperimentError(f"{where}: needs a results_dir (a folder name)")
        key = os.path.normpath(ROOT / results_dir)
        own = set(body["policies"]) if isinstance(body.get("policies"), list) else set(policies)
        for other, theirs in folders.get(key, []):
            if own & theirs:
                raise ExperimentError(f"{where}: results_dir {results_dir!r} is also setting {other!r}'s, with "
                                      f"{', '.join(sorted(own & theirs))} in both; the runs would overwrite each "
                                      "other: give each setting its own folder")
        folders.setdefault(key, []).append((name, own))
        blocked = file_in_the_way(key)
        if blocked is not None:
            raise ExperimentError(f"{where}: results_dir {results_dir!r}: {blocked} is a file, not a folder")
        settings[name] = (results_dir, {**common, **_flags(body.get("flags"), f"{where}.flags")})
    return settings
