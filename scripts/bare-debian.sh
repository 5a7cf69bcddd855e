#!/usr/bin/env bash
# The README's two commands on a bare Debian 12, to check that a newcomer
# needs nothing installed by hand and to measure the time and disk figures
# the README gives. Run by hand: it takes from half an hour to over an hour
# on 2 cores, too long for CI.
#
# Usage (as root, on a Debian or Ubuntu machine with the Rust toolchain
# installed by rustup):
#   bash scripts/bare-debian.sh ROOT [--remove]
#
# ROOT is a new (or empty) directory on a disk with 20 GB free. The script:
# 1. debootstraps Debian 12 there (bookworm, --variant=minbase, plus gcc and
#    libc6-dev, which rustc links with, and ca-certificates, which cargo
#    checks crates.io against), with the apt sources, /etc/hosts and
#    /etc/resolv.conf of a stock install, and the certificate authorities
#    this machine adds to Debian's (/usr/local/share/ca-certificates: a
#    network whose proxy inspects TLS needs them on every machine);
# 2. gives it this machine's Rust toolchain: $RUSTUP_HOME (default
#    ~/.rustup) mounted read-only, rustup's proxies copied from
#    $CARGO_HOME/bin; the chroot's own ~/.cargo holds the crates it fetches;
# 3. clones this repository's committed HEAD into /root/items-service
#    (from here: git is not in the chroot, and nothing needs it);
# 4. runs it in namespaces of its own: a network namespace whose only way
#    out is a veth pair masqueraded by this machine (so its 127.0.0.1 is
#    its own: this machine's PostgreSQL and Redis are not there, and the
#    test suite starts its own); a PID namespace, so nothing it starts
#    outlives it; a mount namespace holding /proc, /sys, /dev (with its own
#    /dev/shm, which Chromium and PostgreSQL use) and the toolchain, all
#    gone when it ends. /tmp is on disk, as on a stock Debian 12;
# 5. inside, as root, with nothing but the PATH rustup sets: the README's run
#    command (`cargo run --release -p items-app`) until it answers on port
#    3000, one GET, SIGTERM, exit 0 expected; then, after removing target/
#    and the fetched crates so the suite starts as on a fresh clone, the
#    README's test command (`bash scripts/test.sh`), which installs the
#    Debian packages it needs itself;
# 6. prints the wall time of each command (and the CPU time it used, which
#    a busy machine inflates less), the disk used by target/ and
#    by the whole chroot, and the load average sampled every 30 s (the
#    machine may be shared: the figures say how busy it was).
#
# Its output and the commands' logs are in ROOT/root/*.log. ROOT is kept
# for inspection (its size is printed) unless --remove is given. The
# network namespace, the veth pair, the NAT rules and every mount go away
# when the script exits, however it exits.
set -euo pipefail

# The phases inside the namespaces run this same file; see the end.
if [[ ${1:-} == --in-namespaces || ${1:-} == --in-chroot ]]; then
  phase=$1
else
  phase=host
fi

# ---------------------------------------------------------------- in chroot

# `http_status PATH`: the status code of GET PATH on 127.0.0.1:3000, with
# bash alone (the bare system has no curl).
http_status() {
  (
    exec 3<> /dev/tcp/127.0.0.1/3000
    printf 'GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' "$1" >&3
    IFS=' ' read -r -t 10 _ status _ <&3
    echo "$status"
  ) 2> /dev/null
}

# The CPU seconds (user and system) of this shell's finished children so
# far: what a command used, whatever else the machine was doing.
cpu_seconds() {
  awk -v tick="$(getconf CLK_TCK)" '{ printf "%d\n", ($16 + $17) / tick }' "/proc/$$/stat"
}

in_chroot() {
  cd /root/items-service
  local start status elapsed pid answer cpu
  echo "== bare Debian $(cat /etc/debian_version), $(nproc) cores, $(rustc --version)"
  echo "== load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

  echo "== the README's run command: cargo run --release -p items-app"
  start=$SECONDS cpu=$(cpu_seconds)
  cargo run --release -p items-app > /root/run.log 2>&1 &
  pid=$!
  until answer=$(http_status /items) && [[ -n $answer ]]; do
    if ! kill -0 "$pid" 2> /dev/null; then
      echo "the run command exited before it answered; its log:" >&2
      tail -n 50 /root/run.log >&2
      return 1
    fi
    sleep 1
  done
  elapsed=$((SECONDS - start))
  echo "GET /items: $answer, ${elapsed} s after the command started (build included)"
  [[ $answer == 200 ]] || { echo "expected 200" >&2; return 1; }
  grep -F 'listening address=0.0.0.0:3000 store=memory' /root/run.log ||
    { echo "no start-up line as the README says; the log:" >&2; cat /root/run.log >&2; return 1; }
  kill -TERM "$pid"
  if wait "$pid"; then status=0; else status=$?; fi
  echo "SIGTERM: exit status $status"
  ((status == 0)) || { tail -n 20 /root/run.log >&2; return 1; }
  echo "RUN first answer ${elapsed} s (CPU $(($(cpu_seconds) - cpu)) s); target/ $(du -sh target | cut -f1), target/release $(du -sh target/release | cut -f1); load $(cut -d' ' -f1-3 /proc/loadavg)"

  # The test command's figures are a fresh clone's: its own build, its own
  # crate downloads.
  rm -rf target "$HOME/.cargo/registry" "$HOME/.cargo/git"

  echo "== the README's test command: bash scripts/test.sh (log: /root/test.log)"
  start=$SECONDS cpu=$(cpu_seconds)
  if bash scripts/test.sh > /root/test.log 2>&1; then status=0; else status=$?; fi
  elapsed=$((SECONDS - start))
  tail -n 30 /root/test.log
  echo "TEST exit $status after $((elapsed / 60)) min $((elapsed % 60)) s (CPU $(($(cpu_seconds) - cpu)) s); target/ $(du -sh target | cut -f1); load $(cut -d' ' -f1-3 /proc/loadavg)"
  return "$status"
}

# ------------------------------------------------------- in the namespaces

# Runs as PID 1 of a new PID namespace, in a new mount namespace, in the
# network namespace: mounts what the chroot needs (gone with the
# namespace), then runs the in-chroot phase with a login's environment.
in_namespaces() {
  local root=$1 rustup_home=$2
  ip link set lo up
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
  mount --bind "$rustup_home" "$root/root/.rustup"
  mount -o remount,bind,ro "$root/root/.rustup"
  chroot "$root" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
    TERM="${TERM:-dumb}" PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash /root/bare-debian.sh --in-chroot
}

case $phase in
  --in-chroot) in_chroot; exit ;;
  --in-namespaces) in_namespaces "$2" "$3"; exit ;;
esac

# ---------------------------------------------------------------- the host

usage() { echo "usage: $0 ROOT [--remove]" >&2; exit 2; }
(($# >= 1)) || usage
root=$1 remove=0
shift
for argument in "$@"; do
  case $argument in
    --remove) remove=1 ;;
    *) usage ;;
  esac
done
((EUID == 0)) || { echo "$0: run it as root (debootstrap, namespaces, mounts)" >&2; exit 1; }
repository="$(cd "$(dirname "$0")/.." && pwd)"
rustup_home="${RUSTUP_HOME:-$HOME/.rustup}"
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
[[ -x $cargo_bin/rustup && -d $rustup_home/toolchains ]] ||
  { echo "$0: no rustup toolchain in $rustup_home and $cargo_bin" >&2; exit 1; }
if [[ -e $root ]] && [[ -n $(ls -A "$root") ]]; then
  echo "$0: $root is not empty: give a new directory" >&2
  exit 1
fi
mkdir -p "$root"
root="$(cd "$root" && pwd)"
free_kb=$(df -Pk "$root" | awk 'NR == 2 { print $4 }')
if ((free_kb < 20 * 1024 * 1024)); then
  echo "$0: only $((free_kb / 1024 / 1024)) GB free under $root: the run needs about 20" >&2
  exit 1
fi
commit="$(git -C "$repository" rev-parse HEAD)"
if [[ -n $(git -C "$repository" status --porcelain) ]]; then
  echo "note: uncommitted changes are not checked: the chroot gets the committed HEAD ($commit)" >&2
fi

source "$repository/scripts/lib/packages.sh"
install_missing debootstrap debootstrap iptables iptables ip iproute2

namespace=items-bare-$$
host_if=ib$$h
state="$(mktemp -d)"
forwarding_before="$(sysctl -n net.ipv4.ip_forward)"
sampler=
subnet=
cleanup() {
  local status=$?
  [[ -n $sampler ]] && kill "$sampler" 2> /dev/null
  ip netns delete "$namespace" 2> /dev/null || true
  if [[ -n $subnet ]]; then
    iptables -t nat -D POSTROUTING -s "$subnet.0/30" ! -o "$host_if" -j MASQUERADE 2> /dev/null || true
    iptables -D FORWARD -i "$host_if" -j ACCEPT 2> /dev/null || true
    iptables -D FORWARD -o "$host_if" -j ACCEPT 2> /dev/null || true
  fi
  # Forwarding goes back off only when it was off and no other run of this
  # script still needs it.
  if [[ $forwarding_before == 0 ]] && ! ls /run/netns 2> /dev/null | grep -q '^items-bare-'; then
    sysctl -qw net.ipv4.ip_forward=0
  fi
  rm -rf "$state"
  if ((remove == 1)); then
    echo "removing $root ($(du -sxh "$root" 2> /dev/null | cut -f1))"
    rm -rf "$root"
  fi
  exit "$status"
}
trap cleanup EXIT

# The machine's load every 30 s, to say how shared it was. (`read -t` on a
# pipe that never ends waits without a `sleep` child that would outlive
# the loop when it is killed.)
(while :; do cut -d' ' -f1 /proc/loadavg; read -rt 30 <> <(:) || :; done) > "$state/load" &
sampler=$!
echo "== load at start: $(uptime)"
started=$SECONDS

echo "== debootstrap bookworm (minbase, gcc, libc6-dev, ca-certificates) into $root"
debootstrap --variant=minbase --include=gcc,libc6-dev,ca-certificates \
  bookworm "$root" http://deb.debian.org/debian > "$state/debootstrap.log" 2>&1 ||
  { tail -n 30 "$state/debootstrap.log" >&2; exit 1; }
echo "   $((SECONDS - started)) s"

# What a stock Debian 12 has beyond debootstrap's minbase: the three apt
# suites, a hosts file naming localhost, a resolver (this machine's, unless
# that is a loopback stub, unreachable from another network namespace).
rm -f "$root/etc/apt/sources.list"
cat > "$root/etc/apt/sources.list.d/debian.sources" << 'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$root/etc/hosts"
resolv=/etc/resolv.conf
grep -q '^nameserver 127\.' "$resolv" && [[ -f /run/systemd/resolve/resolv.conf ]] &&
  resolv=/run/systemd/resolve/resolv.conf
cp "$resolv" "$root/etc/resolv.conf"

# The certificate authorities this machine adds to Debian's (a network whose
# proxy inspects TLS needs its own on every machine; without them cargo,
# apt over https, pip and npm cannot reach their registries from here).
if compgen -G '/usr/local/share/ca-certificates/*.crt' > /dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates > /dev/null 2>&1
  echo "   this machine's own certificate authorities added: $(cd /usr/local/share/ca-certificates && echo *.crt)"
fi

# The Rust toolchain: rustup's proxies here, its toolchains mounted.
mkdir -p "$root/root/.cargo/bin" "$root/root/.rustup"
cp "$cargo_bin/rustup" "$root/root/.cargo/bin/"
for proxy in "$cargo_bin"/*; do
  [[ -L $proxy && $(readlink "$proxy") == rustup ]] && ln -s rustup "$root/root/.cargo/bin/$(basename "$proxy")"
done

git clone -q --no-hardlinks "$repository" "$root/root/items-service"
git -C "$root/root/items-service" checkout -q --detach "$commit"
cp "$0" "$root/root/bare-debian.sh"
base_size="$(du -sxh "$root" | cut -f1)"
echo "   the bare system with the clone: $base_size"

# Its network: a /30 no interface here uses, a veth pair, NAT out.
for n in $(seq 1 254); do
  ip -4 addr | grep -q "inet 10\.199\.$n\." || { subnet=10.199.$n; break; }
done
[[ -n $subnet ]] || { echo "$0: no free 10.199.N.0/30" >&2; exit 1; }
ip netns add "$namespace"
ip link add "$host_if" type veth peer name eth0 netns "$namespace"
ip addr add "$subnet.1/30" dev "$host_if"
ip link set "$host_if" up
ip -n "$namespace" addr add "$subnet.2/30" dev eth0
ip -n "$namespace" link set eth0 up
ip -n "$namespace" route add default via "$subnet.1"
sysctl -qw net.ipv4.ip_forward=1
iptables -t nat -A POSTROUTING -s "$subnet.0/30" ! -o "$host_if" -j MASQUERADE
iptables -A FORWARD -i "$host_if" -j ACCEPT
iptables -A FORWARD -o "$host_if" -j ACCEPT

echo "== inside: the README's run and test commands (logs: $root/root/run.log, test.log)"
set +e
ip netns exec "$namespace" unshare --pid --fork --mount --propagation private \
  bash "$0" --in-namespaces "$root" "$rustup_home" 2>&1 | tee "$root/root/bare-debian.log"
status=${PIPESTATUS[0]}
set -e

echo "== disk (measured from outside, the mounts gone)"
du -sxh "$root" "$root/root/items-service/target" "$root/root/.cargo" "$root/usr" "$root/var" "$root/tmp" \
  "$root/root/.cache" "$root/root/.npm" 2> /dev/null || true
echo "ALL chroot $(du -sxh "$root" | cut -f1) (it was $base_size before the commands); the toolchain, mounted, is $(du -sh "$("$cargo_bin/rustc" --print sysroot)" | cut -f1) more"
sort -n "$state/load" | awk '{ l[NR] = $1; s += $1 } END { if (NR) printf "LOAD 1-min average over the run (%d samples every 30 s): mean %.2f, min %.2f, max %.2f\n", NR, s / NR, l[1], l[NR] }'
echo "== load at end: $(uptime); $((SECONDS - started)) s in all; exit $status"
exit "$status"
