"""Sends scripts/footprint.sh's 10,000 API requests to the agent at argv[1]."""
import http.client, sys
host, port = sys.argv[1].rsplit(":", 1)
paths = ["/v1/status", "/healthz", "/metrics", "/v1/events?limit=50"]
for k in range(10000):
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    c.request("GET", paths[k % len(paths)])
    r = c.getresponse(); r.read(); c.close()
    assert r.status == 200, r.status
