#!/usr/bin/env bash
# Checks the README's two commands on a fresh Debian 12: debootstraps a minimal bookworm into a
# directory (from Debian's mirror only), clones this repository's HEAD into it, and runs
# `bash scripts/run_example.sh` then `bash scripts/test.sh` there as root in a chroot — no CUDA
# toolkit and no ../shared, as on a new machine. Needs root and debootstrap (apt-get install
# debootstrap); takes about 15 minutes on 2 cores. Usage:
#   bash scripts/check_fresh_debian.sh [DIR]   # DIR: an empty directory for the system (default
#                                              # a new one under /tmp); removed afterwards
#                                              # unless KEEP=1
# Exit status: that of the two commands (0: both passed). The log is DIR.log.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-$(mktemp -d /tmp/jitfit-debian12-XXXXXX)}
log=$root.log
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mounted=()
cleanup() {
  # the system is removed only once nothing of the host is mounted in it any more
  local ok=1
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || ok=0; done
  for d in proc sys dev/pts dev; do if mountpoint -q "$root/$d"; then ok=0; fi; done
  if [ $ok = 1 ] && [ "${KEEP:-0}" != 1 ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT
echo "check_fresh_debian: $root (log: $log)"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$log" 2>&1
home=/root # root's home in the chroot, where the clone goes
git clone -q "$repo" "$root$home/jitfit"
for d in proc sys dev dev/pts; do
  mount --bind "/$d" "$root/$d"
  mounted+=("$root/$d")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
set +e
chroot "$root" /usr/bin/env -i HOME="$home" PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
  bash -c 'cd ~/jitfit && bash scripts/run_example.sh && echo "== run_example.sh passed" &&
           bash scripts/test.sh && echo "== test.sh passed"' >> "$log" 2>&1
rc=$?
set -e
grep -E "^== |tests passed|tests failed" "$log" || true
echo "check_fresh_debian: exit status $rc"
exit $rc
