#!/usr/bin/env python3
"""Resolve NAME (A record) against one DNS server over UDP, stdlib only; print the addresses.

    dnsprobe.py NAME SERVER [--timeout S] [--expect-rcode N]

Exit 0 when the answer has the expected rcode (default 0 = NOERROR, with at least one A record).
Used by cluster/up.sh to check that CoreDNS answers through the kube-dns Service.
"""
import argparse
import random
import socket
import struct
import sys


def query(name: str, server: str, timeout: float) -> tuple[int, list[str]]:
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(q, (server, 53))
        data, _ = s.recvfrom(4096)
    rid, flags, qd, an, _, _ = struct.unpack(">HHHHHH", data[:12])
    if rid != qid:
        raise RuntimeError("mismatched DNS id")
    pos = 12
    def skip_name(p: int) -> int:
        while True:
            n = data[p]
            if n & 0xC0 == 0xC0:
                return p + 2
            if n == 0:
                return p + 1
            p += n + 1
    for _ in range(qd):
        pos = skip_name(pos) + 4
    addrs = []
    for _ in range(an):
        pos = skip_name(pos)
        rtype, _, _, rdlen = struct.unpack(">HHIH", data[pos:pos + 10])
        pos += 10
        if rtype == 1 and rdlen == 4:
            addrs.append(socket.inet_ntoa(data[pos:pos + 4]))
        pos += rdlen
    return flags & 0xF, addrs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("server")
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--expect-rcode", type=int, default=0)
    a = ap.parse_args()
    try:
        rcode, addrs = query(a.name, a.server, a.timeout)
    except (OSError, RuntimeError) as e:
        print(f"{a.name} @{a.server}: {e}", file=sys.stderr)
        return 2
    print(f"{a.name} @{a.server}: rcode={rcode} {' '.join(addrs)}")
    if rcode != a.expect_rcode or (rcode == 0 and not addrs):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
