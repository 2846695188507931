#!/usr/bin/env bash
# Installs what the remote-copy tests and bench need, idempotently: OpenSSH server (sshd,
# sftp-server) and client (ssh-keygen, scp), GNU tar/coreutils, util-linux (mount for the
# full-disk test). The tests start their own sshd processes; nothing is enabled as a service.
# Needs root (sshd must switch to the deploy user the tests create).
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] && [ -x /usr/lib/openssh/sftp-server ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null && command -v scp >/dev/null || need+=(openssh-client)
command -v tar >/dev/null || need+=(tar)
command -v sha256sum >/dev/null && command -v timeout >/dev/null || need+=(coreutils)
command -v useradd >/dev/null || need+=(passwd)
command -v mount >/dev/null || need+=(mount)
if [ "${#need[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# sshd refuses to start without its privilege-separation directory.
install -d -m 0755 /run/sshd
