"""``python -m tilelab.models``: the ``generate`` and ``chat`` commands (as ``tilelab
generate`` and ``tilelab chat``)."""
import sys

from tilelab.models.cli import main

sys.exit(main())
