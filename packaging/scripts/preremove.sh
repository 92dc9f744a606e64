#!/bin/sh
# leaseside pre-remove (.deb prerm, .rpm %preun): on removal (not on an
# upgrade) stops and disables the units, so that nothing runs a binary
# about to disappear. Safe to run again.
set -e

case "$1" in
remove | 0) ;; # .deb remove; .rpm: no version left installed
*) exit 0 ;;   # upgrade, deconfigure, failed-upgrade; .rpm upgrade (1)
esac

if [ -d /run/systemd/system ]; then
	systemctl disable --now leaseside.socket leaseside.service leaseside-grantor.service >/dev/null 2>&1 || true
fi
exit 0
