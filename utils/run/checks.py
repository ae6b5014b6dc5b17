"""``validate``: every check before a run creates or writes anything. A3C's own limits (one shared model, CPU
workers: ``asynchronous.check_a3c``) come first, then the checks of every run (``config.check_settings``). It sits
above both, so that the settings module needs nothing of the asynchronous trainer."""
from __future__ import annotations

from ..naming import parse_policy
from .config import RunConfig, check_settings


def validate(cfg: RunConfig, names: dict[str, str] | None = None) -> None:
    """Reject impossible settings before anything is created or written (``names``: RunConfig field -> the
    calling command line's flag name)."""
    if parse_policy(cfg.policy) is not None and cfg.algorithm == "A3C":
        from .onpolicy.asynchronous import check_a3c

        check_a3c(cfg)
    check_settings(cfg, names)


def check_environment(cfg: RunConfig) -> None:
    """The checks of a run that need its environment's spaces, as the trainers make them before anything is written:
    the kind of action space the algorithm takes (a continuous-action algorithm on a discrete environment), finite
    bounds, flat observations for a replay learner, flags of one kind of action space, A3C's model. The environment
    is made once per id and process (``registry.env_spaces``), so checking many runs of few environments is quick.
    What depends on the machine at the time of the run (memory for the buffers, model files) is not checked here."""
    from ..envs.registry import check_env, image_task
    from ..errors import UsageError
    from ..naming import ALGORITHM

    spec = ALGORITHM[cfg.algorithm]
    if spec.family == "async":
        from .onpolicy.asynchronous import a3c_spec

        a3c_spec(cfg)
        return
    spaces = check_env(cfg.env, spec.actions, cfg.algorithm, joint=spec.family == "rollout")
    from ..envs.joint import check_in_process, is_joint
    from ..envs.registry import check_joint

    if is_joint(spaces):
        check_joint(cfg.env, spaces, cfg.num_agents, cfg.algorithm)
        check_in_process(cfg.env_workers)
    shape = tuple(spaces.observation_space.shape or ())
    if spec.family == "replay" and len(shape) != 1 and not image_task(cfg.env):  # as make_learner (Atari's
        raise UsageError(f"--env {cfg.env}: observations of shape {shape}; {cfg.algorithm} needs flat ones or a "
                         "pixel task's frame stacks")  # images pass make_env for ac_main.py)
    if spec.family == "rollout":
        from .onpolicy.rollout import check_action_flags

        check_action_flags(cfg.algorithm, cfg.algo, type(spaces.action_space).__name__ == "Discrete")
