"""The training stack and the tools around it (``utils.run``, ``utils.envs``, ``utils.sweep``, ``utils.plot``, ...).

Importing the package sets one process-wide default before torch loads: OpenMP's threads (torch's CPU kernels)
sleep when they wait instead of spinning. libgomp's threads otherwise spin at every barrier for a while; beside
another busy process a spinning thread burns the time slices its sibling needs, and a run with the default thread
count crawled at a tenth of ``--threads 1``'s speed (docs/performance.md, "CPU threads"). An ``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT`` of the user's own is left as it is.
"""
import os

if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
