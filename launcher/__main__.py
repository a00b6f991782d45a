"""`python -m launcher`."""

from launcher.run import main

raise SystemExit(main())
