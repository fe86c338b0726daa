#!/bin/sh
# install-secrets.sh UID:GID DIR FILE [FILE ...]: copies each FILE (a compose secret, /run/secrets/NAME) to DIR/NAME,
# owned by UID:GID and readable by that user alone (0400); DIR itself becomes UID:GID 0500.
#
# docker-compose.yml runs it as the one-shot worker-secrets, into the volume the worker mounts at /run/backupcycle:
# the worker reads a password_file only when no other user may read it and it belongs to the worker's user or root,
# and compose mounts a secret file as it is on the host (0644 and the host user's, so that the images whose processes
# run as other users can read theirs): it cannot give the file another owner or mode. Needs a POSIX sh, cat, chown,
# chmod and mv, as root. Run again (each `docker compose up`), it installs the files anew.
set -eu

usage() {
  echo "install-secrets: usage: install-secrets.sh UID:GID DIR FILE [FILE ...]" >&2
  exit 2
}

[ "$#" -ge 3 ] || usage
owner="$1"
dir="$2"
shift 2
case "$owner" in
  [0-9]*:[0-9]*) ;;
  *) usage ;;
esac
case "$owner" in
  *[!0-9:]* | *:*:*) usage ;;
esac

mkdir -p "$dir"
chmod 0700 "$dir"
for file in "$@"; do
  if [ ! -r "$file" ] || [ ! -f "$file" ]; then
    echo "install-secrets: cannot read $file: create the secrets with deploy/make-secrets.sh" >&2
    exit 1
  fi
  if [ ! -s "$file" ]; then
    echo "install-secrets: $file is empty: write the secret on its first line (deploy/make-secrets.sh does)" >&2
    exit 1
  fi
  name="$(basename "$file")"
  tmp="$dir/.$name.tmp"
  # Created owner-only, so the password is never in a file others may read, even for a moment.
  (umask 077 && cat "$file" >"$tmp")
  chown "$owner" "$tmp"
  chmod 0400 "$tmp"
  mv -f "$tmp" "$dir/$name"
  echo "installed $dir/$name"
done
chown "$owner" "$dir"
chmod 0500 "$dir"
