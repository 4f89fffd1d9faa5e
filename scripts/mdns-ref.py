#!/usr/bin/env python3
"""The reference side of tests/mdns.rs: python-zeroconf (a complete
mDNS/DNS-SD implementation) reading what a stead agent answers, and
announcing a listener the agent must find.

  mdns-ref.py browse IP SECONDS
      Browses _stead-peer._tcp.local. on the interface that holds IP and
      prints, as one JSON line, the first service resolved: its name,
      IPv4 addresses and port. Exits 1 when none is within SECONDS.

  mdns-ref.py publish IP NAME ADDRESS PORT
      Registers NAME._stead-peer._tcp.local. at ADDRESS:PORT on the
      interface that holds IP, prints "registered", and holds it until
      its standard input closes; then unregisters it (a goodbye: TTL 0).
"""

import json
import socket
import sys
import threading

from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, Zeroconf

SERVICE = "_stead-peer._tcp.local."


def browse(ip, seconds):
    zc = Zeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
    found = threading.Event()
    result = {}

    class Listener:
        def add_service(self, zc, type_, name):
            info = zc.get_service_info(type_, name, timeout=3000)
            if info is None or found.is_set():
                return
            result.update(
                name=name,
                addresses=info.parsed_addresses(IPVersion.V4Only),
                port=info.port,
            )
            found.set()

        def update_service(self, zc, type_, name):
            self.add_service(zc, type_, name)

        def remove_service(self, zc, type_, name):
            pass

    ServiceBrowser(zc, SERVICE, Listener())
    ok = found.wait(seconds)
    zc.close()
    if not ok:
        print(f"no {SERVICE} within {seconds} s", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


def publish(ip, name, address, port):
    zc = Zeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
    info = ServiceInfo(
        SERVICE,
        f"{name}.{SERVICE}",
        addresses=[socket.inet_aton(address)],
        port=port,
        server=f"{name}.local.",
    )
    zc.register_service(info)
    print("registered", flush=True)
    sys.stdin.read()
    zc.unregister_service(info)
    zc.close()
    return 0


def main(argv):
    if len(argv) == 3 and argv[0] == "browse":
        return browse(argv[1], float(argv[2]))
    if len(argv) == 5 and argv[0] == "publish":
        return publish(argv[1], argv[2], argv[3], int(argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
