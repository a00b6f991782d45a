"""`python -m bandkit.emulator --help`."""

from bandkit.emulator.cli import main

raise SystemExit(main())
