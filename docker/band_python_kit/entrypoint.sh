#!/usr/bin/env bash
# band-python-kit entrypoint. Runs as root: trusts the sandbox proxy's CA when
# PROXY_CA_CERT_B64 is set (the validated certificate is appended to the system bundle,
# no bundle rebuild), checks the SDK interpreter, then execs the command as uid 1000
# with no capabilities. Nothing the user supplies ever runs as root.
# BAND_KIT_AGENT_GID (default 1000) is the agent's primary gid: the docker runtime gives
# each box one that no host account has, so a host process of uid 1000 cannot read the
# agent's /proc (environ, memory), which needs its uid and its gid to match.
set -euo pipefail

readonly bundle=/etc/ssl/certs/ca-certificates.crt
readonly proxy_ca=/usr/local/share/ca-certificates/sandbox-proxy-ca.crt
die() { echo "[band-python-kit] ERROR: $*" >&2; exit 1; }

if [[ -n "${PROXY_CA_CERT_B64:-}" ]]; then
  pem="$(base64 -d <<<"$PROXY_CA_CERT_B64" 2>/dev/null | openssl x509 -outform PEM 2>/dev/null)" \
    || die "PROXY_CA_CERT_B64 did not decode to a valid PEM certificate"
  # A restarted sandbox runs this again: append each certificate once.
  if ! [[ -f "$proxy_ca" && "$(<"$proxy_ca")" == "$pem" ]]; then
    printf '%s\n' "$pem" >"$proxy_ca"
    printf '%s\n' "$pem" >>"$bundle"
  fi
fi
[[ -x "${BAND_SDK_PYTHON:-}" ]] || die "SDK interpreter not found at ${BAND_SDK_PYTHON:-<unset>}"
agent_gid="${BAND_KIT_AGENT_GID:-1000}"
[[ "$agent_gid" =~ ^[1-9][0-9]{0,9}$ ]] || die "BAND_KIT_AGENT_GID must be a gid above 0"

exec setpriv --reuid=1000 --regid="$agent_gid" --init-groups --inh-caps=-all \
  --bounding-set=-all --no-new-privs -- "$@"
