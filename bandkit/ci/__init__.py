"""CI plumbing: the lane registry (`lanes`), what each lane installs (`prepare`), and
running a command as root (`privilege`)."""
