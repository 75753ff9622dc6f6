"""`python -m tuner.cli`: the `tuner` command, as the tests and the deploy files start it."""

import sys

from tuner.cli import main

sys.exit(main())
