#!/usr/bin/env bash
# Upstream-like entrypoint, RECONSTRUCTED for the image benchmark (IMG-15..17): the proxy
# CA goes through update-ca-certificates on every start.
set -euo pipefail
ca=/usr/local/share/ca-certificates/sandbox-proxy-ca.crt
if [[ -n "${PROXY_CA_CERT_B64:-}" ]]; then
  if ! base64 -d <<<"$PROXY_CA_CERT_B64" >"$ca" 2>/dev/null || ! openssl x509 -in "$ca" -noout 2>/dev/null; then
    echo "[band-python-kit] ERROR: PROXY_CA_CERT_B64 did not decode to a valid PEM certificate" >&2
    exit 1
  fi
  update-ca-certificates >/dev/null 2>&1
fi
if [[ ! -x "${BAND_SDK_PYTHON}" ]]; then
  echo "[band-python-kit] ERROR: SDK interpreter not found at ${BAND_SDK_PYTHON}" >&2
  exit 1
fi
exec setpriv --reuid=agent --regid=agent --init-groups -- "$@"
