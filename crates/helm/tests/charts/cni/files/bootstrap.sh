#!/bin/sh
set -e
echo "mounting bpf fs"
mount | grep -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
