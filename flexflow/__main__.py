"""`python -m flexflow script.py [flags]`: the `flexflow_python` launcher (flexflow/launcher.py)."""

import sys

from .launcher import main

sys.exit(main())
