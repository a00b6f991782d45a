"""`python -P -m bandkit.proxies.keyproxy PORTS_FILE [HOST] < config.json`: serve one box's
credential proxy (`server.main`)."""

import sys

from bandkit.proxies.keyproxy.server import main

raise SystemExit(main(sys.argv[1:]))
