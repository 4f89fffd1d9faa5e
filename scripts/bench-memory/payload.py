"""Prints a plane payload of argv[1] modules. Run by scripts/bench-memory.sh."""
import json, sys
n = int(sys.argv[1])
mods = []
for k in range(n):
    mods.append({
        "name": f"m{k}",
        "image": "127.0.0.1:9/stead-absent/app:1.0.0",
        "command": ["sh", "-c", "exec /app --config /etc/app/config.json"],
        "env": {"MODE": "production", "REGION": f"region-{k % 7}",
                "TOKEN": f"token-{k:08}-" + "s" * 40},
        "restart": "always",
        "config": {"path": "/etc/app/config.json", "format": "json",
                   "defaults": {"log": {"level": "warn"}, "http": {"port": 80}, "peer": {"url": ""}}},
        "settings": {"log.level": "info", "http.port": 8000 + k % 1000,
                     "peer.url": f"http://peer-{k}.local:9000/api/v1/endpoint"},
        "files": [{"path": "/etc/app/banner.txt", "content": f"module {k}: " + "b" * 145 + "\n"}],
    })
print(json.dumps({"poll": {"interval": "1h"}, "modules": mods}))
