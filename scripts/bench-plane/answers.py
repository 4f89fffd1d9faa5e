"""Exits 0 when the bench's nginx on port argv[1] answers with the token argv[2]."""
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/__bench", timeout=1) as r:
    sys.exit(0 if r.read().decode() == sys.argv[2] else 1)
