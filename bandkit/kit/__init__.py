"""The kit: its spec, and provisioning an agent into a sandbox.

Flow of `kit.provision`: `commands` (platform choice, user key, manifest path) →
`provision` (register through `platform_api`, write agent.id with `band_yaml`, store the
key, create the sandbox through a runtime) ; `kit.unprovision` tears down what the manifest
lists (`rooms` removes recorded rooms). `spec` validates and stamps spec.yaml.
"""
