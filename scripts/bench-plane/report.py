"""Prints scripts/bench-plane.sh's table from the driver's JSON results."""
import json, statistics, sys
d = json.loads(sys.argv[1])
modules = int(sys.argv[2])
med = lambda rs, k: statistics.median(r[k] for r in rs)
a, b, c = d["r304"], d["rdoc"], d["rgroup"]
print("| cycle | GET: request + response bytes | status PUTs: count, bytes each, bytes per cycle | agent CPU per cycle, less the baseline | the agent's own | the baseline (twin, no plane) |")
print("|---|---|---|---|---|---|")
for name, rs in (("304 (document unchanged)", a), (f"new revision, {modules} modules ({d['doc_size']} B document)", b),
                 (f"304 twice: the node's document ({d['grouped_node_size']} B) and its group's ({d['group_size']} B, the {modules} modules), unchanged", c)):
    puts = sum(r["puts"] for r in rs)
    each = sum(r["put_total"] for r in rs) / puts if puts else 0
    print(f"| {name} | {med(rs, 'get_req'):.0f} + {med(rs, 'get_sent'):.0f} = {med(rs, 'get_bytes'):.0f} B"
          f" | {puts} in {len(rs)} rounds, {each:.0f} B, {med(rs, 'put_bytes'):.0f} B"
          f" | {med(rs, 'cpu_ms'):.3f} ms | {med(rs, 'plane_ms'):.3f} ms | {med(rs, 'twin_ms'):.3f} ms |")
ratio = med(b, "cpu_ms") / med(a, "cpu_ms") if med(a, "cpu_ms") > 0 else float("inf")
print(f"CPU per {modules}-module cycle / CPU per 304 cycle: {ratio:.1f}x")
per_round = lambda rs: ", ".join("%.3f" % r["cpu_ms"] for r in rs)
print(f"per round, ms per cycle: 304 {per_round(a)}; document {per_round(b)}; 304 with a group {per_round(c)}")
print(f"cross-check, /proc/<pid>/stat utime+stime over all rounds (10 ms ticks): 304 {d['ticks_ms']['304']:.2f} ms, document {d['ticks_ms']['doc']:.2f} ms, 304 with a group {d['ticks_ms']['group']:.2f} ms per cycle")
print(f"TCP connections opened in all rounds: 304 {sum(r['new_conns'] for r in a)}, document {sum(r['new_conns'] for r in b)}, 304 with a group {sum(r['new_conns'] for r in c)} (the rest reused a kept-alive one)")
