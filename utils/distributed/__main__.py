import os
import sys

try:  # Ctrl-C while the tool loads: one line and exit 130, as later
    from .cli import main
except KeyboardInterrupt:
    sys.stderr.write("python -m utils.distributed: interrupted while starting: nothing written\n")
    raise SystemExit(130) from None

code = main()
# the run's files are written and Ray is shut down (utils/distributed/ray_local.py) by now; Python's own teardown is skipped, as
# Ray's threads can crash it after a start-up cut short by Ctrl-C (a segfault in place of the exit code)
for stream in (sys.stdout, sys.stderr):
    try:
        stream.flush()
    except (OSError, ValueError):
        pass
os._exit(code)
