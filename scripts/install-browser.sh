#!/usr/bin/env bash
# Debian's Chromium for the browser tests (Playwright drives it through executable_path;
# no browser download).  Skips when it is already installed.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
