"""The suite file: reading it, checking every key, and the values it holds (``Suite``, its ``Task``s and ``Method``s).

Only what the file itself says is checked here; the runs it makes (each method's flags parsed by its script, each
run against its environment's spaces) are checked by ``plan.plan_suite`` through the sweep's own checks.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..naming import script_of
from ..sweep.experiment import POLICIES, ROOT, ExperimentError, _flags, parse_seeds, positive, read_yaml

TOP_KEYS = {"name", "description", "tasks", "methods", "baseline", "seeds", "budget", "budget_rule", "start_steps",
            "eval_freq", "eval_episodes", "final_evaluations", "efficiency_points", "bootstrap_reps",
            "bootstrap_seed", "pairs", "results_dir", "flags", "threads_per_run", "gpus_per_run", "device", "at_steps",
            "score", "docs", "claims", "seeds_per_run"}
REQUIRED_KEYS = ("tasks", "methods", "baseline", "seeds", "budget")
TASK_KEYS = {"env", "name", "random", "target", "budget", "flags", "references", "methods"}
METHOD_KEYS = {"policy", "flags", "results_dir", "description", "seeds", "seed_flags"}
# flags that may differ between a method's seeds: they change how the CPU rounds, not what the method is
SEED_FLAGS = ("flush_denormals",)
REFERENCE_KEYS = {"folder", "prefix", "eval_freq", "description"}
DOCS_KEYS = {"file", "marker"}
CLAIM_KEYS = {"name", "statement", "source", "a", "b", "tasks", "metric", "direction", "published", "kind", "margin",
              "note"}
CLAIM_REQUIRED = ("name", "statement", "source", "a", "b")
METRICS = {"final": "the final score at the budget (the mean of the last K evaluations)",
           "at_step": "the score at a declared step (the mean of the K evaluations ending there)",
           "auc": "the area under the curve up to the budget, over the budget (the mean return along training)",
           "steps_to": "the steps until the mean of K evaluations first reaches a declared threshold"}
DIRECTIONS = ("greater", "less")
KINDS = ("superiority", "equivalence")
SCORES = {"own": "each agent's return on the task it trains on (its curve file)",
          "tasks": "each agent's return averaged over all the task's variants (its {curve}_tasks.npy, --eval_tasks all)"}
BUDGET_RULES = ("per_agent", "total")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a folder name: the suite's, a method's (its results folder)
RESULTS_ROOT = "Learning Curves/compare"  # default results: {RESULTS_ROOT}/{suite name}/{method name}
BOOTSTRAP_REPS = 2000  # the project's default (utils/plot/stats.py); rliable's own default is 50000


class SuiteError(ExperimentError):
    """A bad suite: one line saying what to change."""


@dataclass(frozen=True)
class Reference:
    """Published curves read beside a task's methods, never run: ``{folder}/{prefix}_{env}_{seed}.npy`` (or
    ``..._{seed}_Agent_{i}.npy``, a seed's agents averaged), with the environment the folder's name (e.g. the DASE
    paper's own runs on the -v2 tasks, "Learning Curves/paper/")."""

    name: str
    folder: str  # relative to the repository
    prefix: str
    eval_freq: int
    description: str = ""


@dataclass(frozen=True)
class Task:
    """One environment, the pair of scores that normalise it, and its budget (steps, read by the budget rule)."""

    name: str  # the label in tables and figure names; the environment id by default
    env: str  # the Gymnasium id that runs
    random: float  # normalises to 0
    target: float  # normalises to 1
    budget: int
    flags: dict[str, Any] = field(default_factory=dict)
    references: tuple[Reference, ...] = ()
    methods: tuple[str, ...] = ()  # the methods that run on this task (every method when the file names none)

    def normalise(self, score):
        return (score - self.random) / (self.target - self.random)


@dataclass(frozen=True)
class Method:
    """A policy of one of the entry scripts with its flags, and the folder its runs write to."""

    name: str
    policy: str
    flags: dict[str, Any]
    results_dir: str  # as the sweep takes it: relative paths are relative to the repository
    description: str = ""
    seeds: tuple[int, ...] = ()  # the suite's unless the method names its own
    # some of its seeds with flags of their own (SEED_FLAGS only): ((seeds, flags), ...), disjoint, among its seeds
    seed_flags: tuple[tuple[tuple[int, ...], dict[str, Any]], ...] = ()

    def parts(self) -> list[Method]:
        """The method as its processes' seed lists: each seed_flags entry's seeds (those of its seeds still listed)
        with its flags, then the rest with the method's own; a method without seed_flags is one part, itself."""
        if not self.seed_flags:
            return [self]
        parts, flagged = [], set()
        for seeds, flags in self.seed_flags:
            own = tuple(s for s in self.seeds if s in seeds)
            flagged.update(seeds)
            if own:
                parts.append(replace(self, seeds=own, flags={**self.flags, **flags}, seed_flags=()))
        rest = tuple(s for s in self.seeds if s not in flagged)
        return ([replace(self, seeds=rest, seed_flags=())] if rest else []) + parts


@dataclass(frozen=True)
class Claim:
    """A published statement the suite tests: A against B on some of its tasks, by one metric, in a direction, of a
    kind (superiority, or equivalence within ``margin``), with the source's effect size when it gives one (A - B in
    the metric's unit: returns, or steps, for one task; normalised scores, or fractions of the budget, for several)."""

    name: str
    statement: str
    source: str
    a: str
    b: str
    tasks: tuple[str, ...]  # task names, in the suite's order
    metric: str  # METRICS
    value: int | float | None  # at_step: the step; steps_to: the threshold (the task's return, or normalised)
    direction: str = "greater"  # DIRECTIONS: the sign of A - B the claim states ("less": A lower, or sooner)
    published: float | None = None
    kind: str = "superiority"  # KINDS
    margin: float | None = None  # equivalence: |A - B| below it, in the metric's unit
    note: str = ""  # one sentence of context for README's row

    def metric_words(self) -> str:
        if self.metric == "at_step":
            return f"the score at step {self.value:,}"
        if self.metric == "steps_to":
            return f"the steps to {self.value:g}"
        return {"final": "the final score", "auc": "the area under the curve"}[self.metric]


@dataclass
class Suite:
    path: Path
    text: str  # the file as written, quoted in the report
    name: str
    description: str
    tasks: list[Task]
    methods: dict[str, Method]
    baseline: str
    seeds: list[int]
    budget_rule: str
    start_steps: int
    eval_freq: int
    eval_episodes: int | None
    final_evaluations: int | None  # K: None for the project's final window (utils.plot.tables.final_window)
    efficiency_points: int
    bootstrap_reps: int
    bootstrap_seed: int
    pairs: list[tuple[str, str]]  # (A, B): A minus B by seed; every method against the baseline, then the file's
    flags: dict[str, Any]
    threads_per_run: int | None
    gpus_per_run: float
    device: str | None
    seeds_per_run: int | None = None  # as the sweep's: seeds per process (None: all of a method's seeds in one)
    at_steps: list[int] = field(default_factory=list)  # besides the budget: windows ending at these steps
    score: str = "own"  # SCORES
    docs: tuple[str, str] | None = None  # (file, marker): where --write_docs puts the table
    claims: list[Claim] = field(default_factory=list)
    so_far: dict[str, tuple[int, int]] | None = None  # --so_far: per task, (the step read up to, the budget)
    notices: list[str] = field(default_factory=list)

    def methods_on(self, task: Task) -> list[str]:
        """The methods that run on ``task``, in the suite's order."""
        return [m for m in self.methods if not task.methods or m in task.methods]

    def tasks_of(self, method: str) -> list[Task]:
        """The tasks ``method`` runs on, in the suite's order."""
        return [t for t in self.tasks if method in self.methods_on(t)]

    def shared_tasks(self, a: str, b: str) -> list[Task]:
        return [t for t in self.tasks_of(a) if b in self.methods_on(t)]


def load_suite(path: str | Path, results_dir: str | None = None, only_seeds: list[int] | None = None) -> Suite:
    """Read and check a suite file; ``results_dir`` replaces its ``results_dir`` (methods' own folders stay);
    ``only_seeds`` keeps, of every method's seeds, those among them (a report on the seeds finished so far).
    Raises SuiteError (an ExperimentError) with a one-line reason."""
    path = Path(path)
    text, spec = _read(path)
    name = spec.get("name", path.stem)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        whence = "" if "name" in spec else " (no name: key, so the file's name without .yaml; give one, name: NAME)"
        raise SuiteError(f"name: {name!r} is not a usable folder name (letters, digits, _ . -){whence}")
    rule = spec.get("budget_rule", "per_agent")
    if rule not in BUDGET_RULES:
        raise SuiteError(f"budget_rule: expected one of {', '.join(BUDGET_RULES)}, got {rule!r}")
    budget = positive(spec["budget"], "budget")
    notices: list[str] = []
    tasks = _tasks(spec["tasks"], budget, notices)
    root = results_dir or spec.get("results_dir") or f"{RESULTS_ROOT}/{name}"
    if not isinstance(root, str) or not root.strip():
        raise SuiteError(f"results_dir: expected a folder name, got {root!r}")
    seeds = parse_seeds(spec["seeds"])
    methods = _methods(spec["methods"], root, seeds)
    if only_seeds is not None:
        for m in methods.values():
            kept = tuple(x for x in m.seeds if x in only_seeds)
            if not kept:
                raise SuiteError(f"--seeds: none of methods.{m.name}'s seeds ({', '.join(map(str, m.seeds))})")
            object.__setattr__(m, "seeds", kept)
        seeds = [x for x in seeds if x in only_seeds] or seeds
    baseline = spec["baseline"]
    if baseline not in methods:
        raise SuiteError(f"baseline: {baseline!r} is not one of the methods ({', '.join(methods)})")
    eval_freq = positive(spec.get("eval_freq", 1000), "eval_freq")
    tasks = [_with_references(t, raw, eval_freq, methods) for t, raw in zip(tasks, spec["tasks"])]
    for m in methods:
        if not any(not t.methods or m in t.methods for t in tasks):
            raise SuiteError(f"methods.{m}: no task lists it (a task's methods: name the methods that run on it)")
    final = spec.get("final_evaluations")
    score = spec.get("score", "own")
    if score not in SCORES:
        raise SuiteError(f"score: expected one of {', '.join(SCORES)}, got {score!r}")
    return Suite(
        path=path, text=text, name=name, description=str(spec.get("description", "")).strip(), tasks=tasks,
        methods=methods, baseline=baseline, seeds=seeds, budget_rule=rule,
        start_steps=positive(spec.get("start_steps", 25_000), "start_steps", minimum=0), eval_freq=eval_freq,
        eval_episodes=positive(spec["eval_episodes"], "eval_episodes") if "eval_episodes" in spec else None,
        final_evaluations=positive(final, "final_evaluations") if final is not None else None,
        efficiency_points=positive(spec.get("efficiency_points", 10), "efficiency_points"),
        bootstrap_reps=positive(spec.get("bootstrap_reps", BOOTSTRAP_REPS), "bootstrap_reps", minimum=10),
        bootstrap_seed=positive(spec.get("bootstrap_seed", 0), "bootstrap_seed", minimum=0),
        pairs=_pairs(spec.get("pairs", []), methods, baseline), flags=_flags(spec.get("flags"), "flags"),
        threads_per_run=positive(spec["threads_per_run"], "threads_per_run") if "threads_per_run" in spec else None,
        gpus_per_run=spec.get("gpus_per_run", 0), device=spec.get("device"),
        seeds_per_run=positive(spec["seeds_per_run"], "seeds_per_run") if "seeds_per_run" in spec else None,
        at_steps=_at_steps(spec.get("at_steps", []), tasks, eval_freq), score=score, docs=_docs(spec.get("docs")),
        claims=_claims(spec.get("claims", []), methods, tasks, eval_freq), notices=notices)


def _read(path: Path) -> tuple[str, dict]:
    """The file's text and its YAML mapping, with only known keys and every required one."""
    text, spec = read_yaml(path, "suite file", SuiteError)
    if not isinstance(spec, dict):
        raise SuiteError("expected a mapping with keys " + ", ".join(REQUIRED_KEYS))
    _known_keys(spec, TOP_KEYS, REQUIRED_KEYS, "")
    return text, spec


def _known_keys(body: dict, allowed: set[str], required: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(k) for k in body if k not in allowed)
    if unknown:
        raise SuiteError(f"{where}unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    missing = [k for k in required if k not in body]
    if missing:
        raise SuiteError(f"{where}missing key(s) {', '.join(missing)}")


def _named_entry(parent: str, name: Any, body: Any, shape: str) -> None:
    """One entry of a mapping of names (methods, a task's references): a usable name and a mapping."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise SuiteError(f"{parent}: {name!r} is not a usable name (letters, digits, _ . -)")
    if not isinstance(body, dict):
        raise SuiteError(f"{parent}.{name}: expected {shape}, got {body!r}")


def _score(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SuiteError(f"{what}: expected a number, got {value!r}")
    return float(value)


def _tasks(raw: Any, budget: int, notices: list[str]) -> list[Task]:
    from ..envs.registry import resolve_env_id
    from ..errors import UsageError

    if not isinstance(raw, list) or not raw:
        raise SuiteError("tasks: expected a list of tasks, each {env: ID, random: SCORE, target: SCORE}")
    tasks: list[Task] = []
    for i, body in enumerate(raw):
        where = f"tasks[{i}]"
        if not isinstance(body, dict) or not isinstance(body.get("env"), str):
            raise SuiteError(f"{where}: expected {{env: ID, random: SCORE, target: SCORE}}, got {body!r}")
        where = f"tasks[{i}] ({body['env']})"
        _known_keys(body, TASK_KEYS, ("env",), f"{where}: ")
        for key, meaning in (("random", "normalises to 0"), ("target", "normalises to 1")):
            if key not in body:
                raise SuiteError(f"{where}: missing reference score {key!r} (the score that {meaning})")
        random, target = _score(body["random"], f"{where}.random"), _score(body["target"], f"{where}.target")
        if random == target:
            raise SuiteError(f"{where}: random and target are both {random:g}; they must differ to normalise")
        try:
            env, notice = resolve_env_id(body["env"])
        except UsageError as e:
            raise SuiteError(f"{where}: {str(e).removeprefix('--env: ')}") from None
        if notice:
            notices.append(notice)
        name = body.get("name", env.replace("/", "-"))
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise SuiteError(f"{where}.name: {name!r} is not a usable name (letters, digits, _ . -)")
        for other in tasks:
            if other.env == env or other.name == name:
                raise SuiteError(f"{where}: {env} ({name}) is already a task; each environment once per suite")
        own = positive(body["budget"], f"{where}.budget") if "budget" in body else budget
        tasks.append(Task(name, env, random, target, own, _flags(body.get("flags"), f"{where}.flags")))
    return tasks


def _methods(raw: Any, root: str, seeds: list[int]) -> dict[str, Method]:
    if not isinstance(raw, dict) or len(raw) < 2:
        raise SuiteError("methods: expected a mapping of two or more method names to {policy: POLICY, flags: {...}}")
    methods: dict[str, Method] = {}
    for name, body in raw.items():
        where = f"methods.{name}"
        _named_entry("methods", name, body, "{policy: POLICY, flags: {...}}")
        _known_keys(body, METHOD_KEYS, ("policy",), f"{where}: ")
        policy = body["policy"]
        if not isinstance(policy, str) or script_of(policy) is None:
            raise SuiteError(f"{where}.policy: unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
        folder = body.get("results_dir", f"{root}/{name}")
        if not isinstance(folder, str) or not folder.strip():
            raise SuiteError(f"{where}.results_dir: expected a folder name, got {folder!r}")
        try:
            own = parse_seeds(body["seeds"]) if "seeds" in body else seeds
        except ExperimentError as e:
            raise SuiteError(f"{where}.{e}") from None
        methods[name] = Method(name, policy, _flags(body.get("flags"), f"{where}.flags"), folder,
                               str(body.get("description", "")).strip(), tuple(own),
                               _seed_flags(body.get("seed_flags"), own, f"{where}.seed_flags"))
    return methods


def _seed_flags(raw: Any, seeds: list[int], where: str) -> tuple[tuple[tuple[int, ...], dict[str, Any]], ...]:
    """{seeds: {flag: value}}: some of a method's seeds run with flags of their own, only those of SEED_FLAGS (a
    setting of the CPU's arithmetic, recorded in each run's record), each seed in one entry at most."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise SuiteError(f"{where}: expected a mapping of seeds (\"8-9\") to flags, got {raw!r}")
    out, seen = [], set()
    for key, body in raw.items():
        try:
            these = parse_seeds(key)
        except ExperimentError as e:
            raise SuiteError(f"{where}.{e}") from None
        flags = _flags(body, f"{where}.{key}")
        if not flags or set(flags) - set(SEED_FLAGS):
            raise SuiteError(f"{where}.{key}: only {', '.join('--' + f for f in SEED_FLAGS)} may differ between a "
                             f"method's seeds (how the CPU rounds, not what the method is); got "
                             f"{', '.join('--' + f for f in flags) or 'no flag'}")
        outside = [s for s in these if s not in seeds]
        if outside:
            raise SuiteError(f"{where}.{key}: seed(s) {', '.join(map(str, outside))} not among the method's seeds")
        again = [s for s in these if s in seen]
        if again:
            raise SuiteError(f"{where}.{key}: seed(s) {', '.join(map(str, again))} already in another entry")
        seen.update(these)
        out.append((tuple(these), flags))
    return tuple(out)


def _pairs(raw: Any, methods: dict[str, Method], baseline: str) -> list[tuple[str, str]]:
    """Every method against the baseline, then the file's own pairs (A minus B), each once."""
    pairs = [(m, baseline) for m in methods if m != baseline]
    if not isinstance(raw, list):
        raise SuiteError(f"pairs: expected a list of [A, B] method pairs, got {raw!r}")
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and all(x in methods for x in item) and item[0] != item[1]):
            raise SuiteError(f"pairs: {item!r} is not a pair [A, B] of two of the methods ({', '.join(methods)})")
        if tuple(item) not in pairs:
            pairs.append(tuple(item))
    return pairs


def _with_references(task: Task, body: dict, eval_freq: int, methods: dict[str, Method]) -> Task:
    """The task with its ``methods`` (a list of two or more of the suite's, default all) and its ``references``
    (name -> {folder, prefix, eval_freq, description}): each folder must hold curves; the reference's evaluations
    must fall on the suite's (its eval_freq divides the suite's)."""
    own = body.get("methods", [])
    if not isinstance(own, list) or (own and (len(own) < 2 or len(set(own)) < len(own)
                                              or any(m not in methods for m in own))):
        raise SuiteError(f"tasks ({task.name}).methods: expected a list of two or more of the methods "
                         f"({', '.join(methods)}), each once, got {own!r}")
    raw = body.get("references", {})
    where = f"tasks ({task.name}).references"
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: expected a mapping of names to {{folder: DIR, prefix: POLICY}}, got {raw!r}")
    refs = []
    for name, ref in raw.items():
        at = f"{where}.{name}"
        _named_entry(where, name, ref, "{folder: DIR, prefix: POLICY}")
        _known_keys(ref, REFERENCE_KEYS, ("folder", "prefix"), f"{at}: ")
        freq = positive(ref.get("eval_freq", eval_freq), f"{at}.eval_freq")
        if eval_freq % freq:
            raise SuiteError(f"{at}.eval_freq: {freq} does not divide the suite's eval_freq {eval_freq}")
        folder = ROOT / str(ref["folder"])
        if not any(folder.glob(f"{ref['prefix']}_{folder.name}_*.npy")):
            raise SuiteError(f"{at}: no {ref['prefix']}_{folder.name}_SEED[_Agent_I].npy curves in {ref['folder']}")
        refs.append(Reference(name, str(ref["folder"]), str(ref["prefix"]), freq,
                              str(ref.get("description", "")).strip()))
    return Task(task.name, task.env, task.random, task.target, task.budget, task.flags, tuple(refs), tuple(own))


def _at_steps(raw: Any, tasks: list[Task], eval_freq: int) -> list[int]:
    """Steps (in the budget's units) where the report reads every method besides its budget: multiples of
    eval_freq, within every task's budget, increasing."""
    if not isinstance(raw, list):
        raise SuiteError(f"at_steps: expected a list of steps, got {raw!r}")
    steps = [positive(x, "at_steps") for x in raw]
    for x in steps:
        if x % eval_freq or x > min(t.budget for t in tasks):
            raise SuiteError(f"at_steps: {x} is not a multiple of eval_freq {eval_freq} within every task's budget")
    if steps != sorted(set(steps)):
        raise SuiteError(f"at_steps: expected increasing steps, each once, got {steps}")
    return steps


def _docs(raw: Any) -> tuple[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SuiteError(f"docs: expected {{file: PATH, marker: NAME}}, got {raw!r}")
    _known_keys(raw, DOCS_KEYS, ("file", "marker"), "docs: ")
    if not all(isinstance(raw[k], str) and raw[k].strip() for k in DOCS_KEYS):
        raise SuiteError(f"docs: file and marker must be names, got {raw!r}")
    return raw["file"], raw["marker"]


def _claims(raw: Any, methods: dict[str, Method], tasks: list[Task], eval_freq: int) -> list[Claim]:
    """The suite's claims, each checked: known keys, two different methods of the suite that share the claim's tasks,
    a known metric with its step (a multiple of eval_freq within the budget) or its threshold, a direction, a kind,
    a margin for an equivalence (and none otherwise), a finite published effect."""
    if not isinstance(raw, list):
        raise SuiteError(f"claims: expected a list of claims, each {{name, statement, source, a, b, ...}}, got {raw!r}")
    claims: list[Claim] = []
    for i, body in enumerate(raw):
        where = f"claims[{i}]"
        if not isinstance(body, dict):
            raise SuiteError(f"{where}: expected a mapping {{name, statement, source, a, b, ...}}, got {body!r}")
        if isinstance(body.get("name"), str):
            where = f"claims.{body['name']}"
        _known_keys(body, CLAIM_KEYS, CLAIM_REQUIRED, f"{where}: ")
        name = body["name"]
        if not isinstance(name, str) or not NAME.fullmatch(name) or any(c.name == name for c in claims):
            raise SuiteError(f"{where}.name: {name!r} is not a usable name (letters, digits, _ . -), once per suite")
        for key in ("statement", "source"):
            if not isinstance(body[key], str) or not body[key].strip():
                raise SuiteError(f"{where}.{key}: expected words, got {body[key]!r}")
        a, b = body["a"], body["b"]
        for key, m in (("a", a), ("b", b)):
            if m not in methods:
                raise SuiteError(f"{where}.{key}: {m!r} is not one of the methods ({', '.join(methods)})")
        if a == b:
            raise SuiteError(f"{where}: a and b are both {a!r}; a claim compares two methods")
        both = [t for t in tasks if (not t.methods or a in t.methods) and (not t.methods or b in t.methods)]
        named = body.get("tasks", [t.name for t in both])
        if isinstance(named, str):
            named = [named]
        if not isinstance(named, list) or not named or len(set(named)) < len(named):
            raise SuiteError(f"{where}.tasks: expected a list of task names, each once, got {named!r}")
        for t in named:
            if t not in [x.name for x in both]:
                raise SuiteError(f"{where}.tasks: {t!r} is not a task both {a} and {b} run "
                                 f"({', '.join(x.name for x in both) or 'none'})")
        metric, value = _claim_metric(body.get("metric", "final"), where, [x for x in tasks if x.name in named],
                                      eval_freq)
        direction = body.get("direction", "greater")
        if direction not in DIRECTIONS:
            raise SuiteError(f"{where}.direction: expected one of {', '.join(DIRECTIONS)}, got {direction!r}")
        kind = body.get("kind", "superiority")
        if kind not in KINDS:
            raise SuiteError(f"{where}.kind: expected one of {', '.join(KINDS)}, got {kind!r}")
        margin = body.get("margin")
        if kind == "equivalence":
            if margin is None:
                raise SuiteError(f"{where}: an equivalence claim needs its margin (margin: M, |A - B| < M in the "
                                 "metric's unit)")
            margin = _score(margin, f"{where}.margin")
            if margin <= 0:
                raise SuiteError(f"{where}.margin: expected a positive number, got {margin:g}")
        elif margin is not None:
            raise SuiteError(f"{where}.margin: only an equivalence claim has a margin (kind: equivalence)")
        published = body.get("published")
        published = _score(published, f"{where}.published") if published is not None else None
        note = body.get("note", "")
        if not isinstance(note, str):
            raise SuiteError(f"{where}.note: expected one sentence, got {note!r}")
        claims.append(Claim(name, body["statement"].strip(), body["source"].strip(), a, b,
                            tuple(t.name for t in tasks if t.name in named), metric, value, direction, published,
                            kind, margin, note.strip()))
    return claims


def _claim_metric(raw: Any, where: str, tasks: list[Task], eval_freq: int) -> tuple[str, int | float | None]:
    """(metric, its step or threshold): "final" or "auc", or {at_step: N} or {steps_to: THRESHOLD}."""
    if isinstance(raw, str) and raw in ("final", "auc"):
        return raw, None
    if isinstance(raw, str) and raw in METRICS:
        what = "a step" if raw == "at_step" else "a threshold (the return to reach)"
        raise SuiteError(f"{where}.metric: {raw} needs {what}: metric: {{{raw}: VALUE}}")
    if isinstance(raw, dict) and len(raw) == 1:
        (metric, value), = raw.items()
        if metric == "at_step":
            step = positive(value, f"{where}.metric.at_step")
            if step % eval_freq or step > min(t.budget for t in tasks):
                raise SuiteError(f"{where}.metric.at_step: {step} is not a multiple of eval_freq {eval_freq} within "
                                 "the claim's tasks' budget")
            return metric, step
        if metric == "steps_to":
            if value is None:
                raise SuiteError(f"{where}.metric.steps_to: a speed claim needs its threshold (the return to reach)")
            return metric, _score(value, f"{where}.metric.steps_to")
    raise SuiteError(f"{where}.metric: expected final, auc, {{at_step: STEP}} or {{steps_to: THRESHOLD}}, "
                     f"got {raw!r}")
