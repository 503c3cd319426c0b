# Shared helpers for the set-up scripts (sourced, not run).
CACHE="${HOLT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/holt}"
export CACHE
step_start() { STEP_NAME="$1"; STEP_T0=$(date +%s); printf '==> %s\n' "$1"; }
step_done() { printf '    done: %s (%ss)\n' "$STEP_NAME" "$(( $(date +%s) - STEP_T0 ))"; }
die() { printf 'setup: FAILED: %s\n' "$*" >&2; exit 1; }
apt_updated=""
apt_install() {
  # Install Debian packages that are missing; update the index once, only when needed.
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -z "$apt_updated" ]; then apt-get update -qq >/dev/null || die "apt-get update failed"; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "could not install Debian packages: ${missing[*]}"
  printf '    installed: %s\n' "${missing[*]}"
}
