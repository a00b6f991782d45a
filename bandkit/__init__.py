"""Host-side library for the Band Python kit: the modules that invoke tasks call.

Each module or subpackage has one concern (doctor, emulator, runtimes, image, kit,
manifest, ci with its lanes, ...); the invoke tasks in `tasks/` parse options and call
into these, and `noxfile.py` checks them.
"""
