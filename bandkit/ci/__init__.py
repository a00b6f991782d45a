"""CI plumbing: the lane registry (`lanes`), what each lane installs and the dockerd it
starts (`prepare`), stopping and starting that daemon again the way it was started
(`dockerd`), running a command as root (`privilege`), and the dependency floors check
(`floors`)."""
