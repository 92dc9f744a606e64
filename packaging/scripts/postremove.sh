#!/bin/sh
# leaseside post-remove (.deb postrm, .rpm %postun): tells systemd the
# units are gone. It removes no data: the grantor's raft log in
# /var/lib/leaseside (with DynamicUser, /var/lib/private/leaseside) holds
# the fencing token counter, which must never go back, so even a purge
# leaves it; so is the leaseside group, as group ids may still own files.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
