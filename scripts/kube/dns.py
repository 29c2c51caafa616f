"""The test cluster's DNS: A records of Services, nothing else (standard library only).

scripts/kube/cluster.sh runs it on the pod bridge's address (the kubelet's clusterDNS), so that a
pod can reach a Service by name (`helm test` does: http://<release>-mrtr-gateway:80/readyz), as
with CoreDNS. It answers ``<service>.<namespace>.svc.cluster.local`` (A: the ClusterIP; AAAA and
other types: no data), and NXDOMAIN for every other name: it forwards nothing anywhere. The
Service list comes from ``kubectl get services`` every second.

    python3 dns.py --listen 10.244.77.1 --kubectl PATH --kubeconfig PATH
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import struct
import subprocess
import threading
import time

DOMAIN = "svc.cluster.local"
A, AAAA = 1, 28


class Services:
    def __init__(self, kubectl: str, kubeconfig: str) -> None:
        self.command = [kubectl, "--kubeconfig", kubeconfig, "get", "services", "--all-namespaces", "-o", "json"]
        self.ips: dict[str, str] = {}

    def refresh_forever(self) -> None:
        while True:
            try:
                out = subprocess.run(self.command, capture_output=True, timeout=10, check=True).stdout  # noqa: S603 (our own kubectl)
                items = json.loads(out).get("items", [])
                self.ips = {
                    f"{i['metadata']['name']}.{i['metadata']['namespace']}.{DOMAIN}": i["spec"]["clusterIP"]
                    for i in items
                    if i.get("spec", {}).get("clusterIP") not in (None, "", "None")
                }
            except (subprocess.SubprocessError, ValueError, KeyError, OSError):
                pass
            time.sleep(2)


def parse_question(packet: bytes) -> tuple[int, int, str, int, int] | None:
    """(id, flags, name, qtype, end of the question) of a one-question query."""
    if len(packet) < 12:
        return None
    ident, flags, qdcount = struct.unpack("!HHH", packet[:6])
    if qdcount != 1 or flags & 0x8000:
        return None
    labels, pos = [], 12
    while pos < len(packet):
        length = packet[pos]
        pos += 1
        if length == 0:
            break
        if length & 0xC0:
            return None
        labels.append(packet[pos : pos + length].decode("ascii", "replace").lower())
        pos += length
    if pos + 4 > len(packet):
        return None
    qtype, _qclass = struct.unpack("!HH", packet[pos : pos + 4])
    return ident, flags, ".".join(labels), qtype, pos + 4


def answer(packet: bytes, services: Services) -> bytes | None:
    parsed = parse_question(packet)
    if parsed is None:
        return None
    ident, flags, name, qtype, end = parsed
    question = packet[12:end]
    ip = services.ips.get(name.rstrip("."))
    rd = flags & 0x0100
    if ip is None:
        return struct.pack("!HHHHHH", ident, 0x8400 | rd | 3, 1, 0, 0, 0) + question  # NXDOMAIN
    if qtype != A or ipaddress.ip_address(ip).version != 4:
        return struct.pack("!HHHHHH", ident, 0x8400 | rd, 1, 0, 0, 0) + question  # no data
    record = struct.pack("!HHHIH", 0xC00C, A, 1, 5, 4) + socket.inet_aton(ip)
    return struct.pack("!HHHHHH", ident, 0x8400 | rd, 1, 1, 0, 0) + question + record


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--port", type=int, default=53)
    parser.add_argument("--kubectl", required=True)
    parser.add_argument("--kubeconfig", required=True)
    args = parser.parse_args()
    services = Services(args.kubectl, args.kubeconfig)
    threading.Thread(target=services.refresh_forever, daemon=True).start()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((args.listen, args.port))
    print(f"dns on {args.listen}:{args.port}", flush=True)
    while True:
        packet, peer = sock.recvfrom(4096)
        reply = answer(packet, services)
        if reply is not None:
            sock.sendto(reply, peer)


if __name__ == "__main__":
    main()
