"""`python -m bandkit.llm --help`."""

from bandkit.llm.cli import main

raise SystemExit(main())
