"""python -m utils.play: watch a trained agent (utils/play/__init__.py)."""
from . import main

raise SystemExit(main())
