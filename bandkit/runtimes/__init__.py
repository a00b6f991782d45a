"""Sandbox runtimes: one interface (`base.Runtime`), three implementations.

`local` runs the launcher as host processes, `sbx` drives the Docker Sandboxes CLI in the
installed version's grammar, `docker` runs plain containers from the kit image. `select`
picks one (`auto`: sbx if installed, else docker if a daemon answers, else local).
"""
