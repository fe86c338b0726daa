#!/bin/sh
# secret-env.sh VAR=/run/secrets/NAME [VAR=FILE ...] -- COMMAND [ARG ...]
#
# Exports each VAR with the first line of its FILE, then replaces itself with COMMAND. docker-compose.yml runs it as
# the entrypoint of the images that read a password only from an environment variable (SQL Server's
# MSSQL_SA_PASSWORD, sqlcmd's SQLCMDPASSWORD, Temporal's POSTGRES_PWD and SQL_PASSWORD, Samba's SMB_PASSWORD), so
# that the password lives in a compose secret (a file under deploy/secrets/, mounted at /run/secrets/NAME) and
# never in docker-compose.yml, an env file or `docker inspect`. Needs only a POSIX sh.
set -eu

usage() {
  echo "secret-env: usage: secret-env.sh VAR=/run/secrets/NAME [VAR=FILE ...] -- COMMAND [ARG ...]" >&2
  exit 2
}

[ "$#" -gt 0 ] || usage
while [ "$#" -gt 0 ]; do
  case "$1" in
    --)
      shift
      break
      ;;
    *=*)
      var="${1%%=*}"
      file="${1#*=}"
      case "$var" in
        '' | [0-9]* | *[!A-Za-z0-9_]*)
          echo "secret-env: $1: \"$var\" is not an environment variable name" >&2
          exit 2
          ;;
      esac
      if [ ! -r "$file" ]; then
        echo "secret-env: $var: cannot read $file as uid $(id -u): create the secrets with deploy/make-secrets.sh, or make the file readable (chmod 0644; deploy/secrets/ itself stays 0700)" >&2
        exit 1
      fi
      value="$(head -n 1 "$file" | tr -d '\r')"
      if [ -z "$value" ]; then
        echo "secret-env: $var: $file is empty: write the password on its first line (deploy/make-secrets.sh does)" >&2
        exit 1
      fi
      export "$var=$value"
      shift
      ;;
    *)
      usage
      ;;
  esac
done
[ "$#" -gt 0 ] || usage
exec "$@"
