"""Host-side library for the Band Python kit: the modules that invoke tasks call.

Each module has one concern (doctor, lanes, emulator, runtimes, image, manifest, ...);
`tasks.py` parses options and calls into these, and `noxfile.py` checks them.
"""
