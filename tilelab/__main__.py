"""``python -m tilelab`` is the ``tilelab`` command."""
import sys

from tilelab.cli import main

sys.exit(main())
