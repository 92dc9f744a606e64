#!/bin/sh
# leaseside post-install (.deb postinst "configure", .rpm %post): safe to
# run again on every upgrade or reinstall. It never enables, starts or
# restarts a unit: the config in /etc/leaseside needs the grantors'
# addresses first, and restarting the sidecar would drop the leases that
# local programs hold. See /usr/share/doc/leaseside/systemd.md.
set -e

# leaseside: the group whose members may use the sidecar's socket.
# leaseside-grantor: the grantor service's (DynamicUser=) supplementary
# group, which may read its TLS key and gossip key (mode 0640); nobody is
# a member of it.
for group in leaseside leaseside-grantor; do
	if ! getent group "$group" >/dev/null 2>&1; then
		if command -v groupadd >/dev/null 2>&1; then
			groupadd --system "$group"
		elif command -v addgroup >/dev/null 2>&1; then
			addgroup --system "$group"
		else
			echo "leaseside: cannot create the $group group (no groupadd or addgroup); create it by hand" >&2
		fi
	fi
done

# Only when systemd is the running init (not in a container build or a
# chroot, where systemctl would fail or act on the wrong system).
if [ -d /run/systemd/system ]; then
	systemd-tmpfiles --create leaseside.conf >/dev/null 2>&1 || true
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
