"""Userspace one-way delay line for the fabric lab (stand-in for netem).

The machine running the lab has no sch_netem, so lab.sh emulates WAN latency
with this relay. It runs inside the lab's `wan` namespace, attaches to an
existing persistent TUN device (created by lab.sh with `ip tuntap add`), and
writes every packet it reads back into the same device DELAY_MS milliseconds
later. Policy routing in the wan namespace sends traffic that arrives from
the routers' public links into the TUN; when the packet is written back it
arrives with iif=TUN, so the main table forwards it to the other site. One
device and one FIFO therefore delay both directions, and ordering is kept
because the delay is constant.

Stdlib only, and meant to be run as `/usr/bin/python3 -I` so that no pyenv
shim or user site-packages is involved.

usage: delay_relay.py DEVICE DELAY_MS PIDFILE
"""

import collections
import fcntl
import os
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
# Bound the queue so a flood (e.g. an iperf run) cannot eat the machine's
# memory: past this many packets in flight we drop, like a full router buffer.
MAX_QUEUED = 20000
MAX_PACKET = 65535


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    dev, delay_ms, pidfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    delay = delay_ms / 1000.0

    fd = os.open("/dev/net/tun", os.O_RDWR)
    # Same flags as `ip tuntap add mode tun` (no packet-info header), so we
    # attach to the persistent device instead of creating a new one.
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)

    # SIGTERM from `lab.sh down` should end the loop promptly and quietly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    # The pid file doubles as the readiness signal: lab.sh waits for it before
    # it routes traffic into the device.
    tmp = pidfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{os.getpid()}\n")
    os.rename(tmp, pidfile)

    queue = collections.deque()  # (due time, packet), due times are increasing
    dropped = 0
    while True:
        timeout = None
        if queue:
            timeout = max(0.0, queue[0][0] - time.monotonic())
        readable, _, _ = select.select([fd], [], [], timeout)
        if readable:
            now = time.monotonic()
            # Drain what is pending now; all of it gets the same due time,
            # which is accurate to well under a millisecond.
            for _ in range(1024):
                try:
                    pkt = os.read(fd, MAX_PACKET)
                except BlockingIOError:
                    break
                if len(queue) >= MAX_QUEUED:
                    dropped += 1
                    continue
                queue.append((now + delay, pkt))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, pkt = queue.popleft()
            try:
                os.write(fd, pkt)
            except OSError:
                # e.g. the device is going away during `lab.sh down`, or the
                # kernel refused a malformed packet: drop it, like a link would.
                dropped += 1


if __name__ == "__main__":
    sys.exit(main())
