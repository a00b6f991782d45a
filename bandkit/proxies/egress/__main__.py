"""`python -m bandkit.proxies.egress CONFIG`: serve one box's egress proxy (`server.main`)."""

import asyncio
import sys
from pathlib import Path

from bandkit.proxies.egress.server import main

asyncio.run(main(Path(sys.argv[1])))
