import sys

from mudiff_viz.cli.main import main

sys.exit(main())
