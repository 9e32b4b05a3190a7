#!/usr/bin/env python3
"""Aggregates a JFR recording of the router into the tables of BENCHMARKS.md, "Where the router's CPU goes".

usage: scripts/jfr-profile.py RECORDING.jfr [--requests N] [--top 40] [--json OUT.json]

Reads the recording with the JDK's `jfr print --json` (jdk.ExecutionSample, jdk.ObjectAllocationSample,
jdk.ThreadCPULoad) and prints: CPU by thread group (thread names with their numbers dropped), from execution
samples and from the threads' own CPU-load events; the methods with the most self samples (top frame); the
methods with the most inclusive samples (anywhere on the stack, once per sample); the top frames of the router's
own code (first dev.kvrouter frame from the top); and allocation by class and by first dev.kvrouter frame.
"""
import argparse
import collections
import json
import re
import subprocess
import sys


# Named parts of the router, matched against every frame of a sample (a sample counts once per part); an indented
# part counts only samples its parent (the nearest less indented part above it) counted
PARTS = [
    ("request stream (ext_proc routing filter)", r"^dev\.kvrouter\.extproc\.server\.RequestStream\."),
    ("  body parsing", r"^dev\.kvrouter\.extproc\.request\.RequestBodyParser"),
    ("  template, tokenizer, block hashes", r"^dev\.kvrouter\.extproc\.(template|tokenize|pipeline)\."),
    ("  decision (Router.route)", r"^dev\.kvrouter\.extproc\.routing\.Router\.route$"),
    ("    index lookup", r"^dev\.kvrouter\.(extproc\.routing\.KvIndexOverlapSource|index\.PrefixCursor)"),
    ("    predicted entries", r"^dev\.kvrouter\.index\.PredictedBlocks\."),
    ("load ledger (reserve, release)", r"^dev\.kvrouter\.extproc\.load\.LoadLedger"),
    ("response observer (ObserverStream)", r"^dev\.kvrouter\.extproc\.server\.ObserverStream\."),
    ("  usage scan", r"^dev\.kvrouter\.extproc\.decision\.UsageScanner\."),
    ("decision metrics", r"^dev\.kvrouter\.extproc\.decision\.DecisionMetrics\."),
    ("decision records (JSON log lines)", r"^dev\.kvrouter\.extproc\.decision\.DecisionLog\."),
    ("logback", r"^ch\.qos\.logback\."),
    ("protobuf", r"^com\.google\.protobuf\."),
    ("gRPC and Netty (our handlers included)", r"^io\.grpc\."),
    ("  outside our handlers (HTTP/2, framing, protobuf)", r"^io\.grpc\.", r"^dev\.kvrouter\."),
    ("KV events thread (EventSubscriber)", r"^dev\.kvrouter\.index\.events\.EventSubscriber"),
    ("  JeroMQ", r"^(zmq|org\.zeromq)\."),
    ("  event application", r"^dev\.kvrouter\.index\.events\.EventApplier\."),
    ("metrics scraper", r"^dev\.kvrouter\.extproc\.load\.MetricsScraper\."),
    ("model load (tokenizer, template; start-up)", r"^dev\.kvrouter\.extproc\.model\.ModelRegistry\$Entry\.load$"),
]


def transport_kind(names):
    """What a gRPC sample outside the router's handlers was doing (frames from the top of the stack down)."""
    joined = " ".join(names)
    if "ProtoLiteUtils$MessageMarshaller.parse" in joined or names[0].startswith("com.google.protobuf"):
        return "protobuf parsing and building"
    if "MessageFramer" in joined or "writeMessage" in joined or "Encoder" in joined or "flush" in joined.lower():
        return "writes (framing, HPACK, flushes)"
    if "streamCreated" in joined or "onHeadersRead" in joined or ("ServerImpl" in joined and "Listener" in joined):
        return "stream set-up, headers"
    if "Deframer" in joined or "onDataRead" in joined:
        return "reading DATA frames"
    if "epoll" in joined.lower() or "Selector" in joined:
        return "event loop, epoll"
    return "other"


def thread_group(name):
    # grpc-default-executor-12, ForkJoinPool-1-worker-3, C2 CompilerThread0: one group each
    return re.sub(r"[-# ]?\d+$", "", re.sub(r"-\d+-", "-N-", name or "?"))


def frame_name(f):
    m = f["method"]
    # hidden lambda classes carry an address and an identity hash: one name for every recording
    t = re.sub(r"\$\$Lambda\$\d+.*", "$$Lambda", m["type"]["name"].replace("/", "."))
    return t + "." + m["name"]


def events(path, types):
    out = subprocess.run(["jfr", "print", "--json", "--stack-depth", "64", "--events", ",".join(types), path],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["recording"]["events"]


def own_frame(frames):
    for f in frames:
        n = frame_name(f)
        if n.startswith("dev.kvrouter."):
            return n
    return "(no dev.kvrouter frame)"


def own_entry(frames):
    """The outermost dev.kvrouter method (frames run from the top of the stack down), lambdas skipped."""
    for f in reversed(frames):
        n = frame_name(f)
        if n.startswith("dev.kvrouter.") and "$$Lambda" not in n and "lambda$" not in n:
            return n
    return "(no dev.kvrouter frame)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recording")
    ap.add_argument("--requests", type=int, default=0, help="requests in the recording, for per-request figures")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--json", help="write the aggregates here too")
    a = ap.parse_args()

    evs = events(a.recording, ["jdk.ExecutionSample", "jdk.ObjectAllocationSample", "jdk.ThreadCPULoad",
                               "jdk.NativeMethodSample"])
    by_thread = collections.Counter()
    self_m = collections.Counter()
    incl_m = collections.Counter()
    own = collections.Counter()
    own_by_thread = collections.defaultdict(collections.Counter)
    entry = collections.Counter()
    parts = collections.Counter()
    transport = collections.Counter()
    # a third element: the part does not count a sample that also has a frame matching it
    part_res = [(p[0], re.compile(p[1]), re.compile(p[2]) if len(p) > 2 else None) for p in PARTS]
    alloc_class = collections.Counter()
    alloc_own = collections.Counter()
    alloc_top = collections.Counter()
    cpu_load = collections.defaultdict(float)  # thread group -> sum of (user+system) load samples
    cpu_load_n = collections.Counter()
    native_thread = collections.Counter()
    samples = 0
    alloc_bytes = 0
    for e in evs:
        t = e["type"]
        v = e["values"]
        if t == "jdk.ExecutionSample":
            frames = (v.get("stackTrace") or {}).get("frames") or []
            if not frames:
                continue
            samples += 1
            g = thread_group(v["sampledThread"].get("javaName") or v["sampledThread"].get("osName"))
            by_thread[g] += 1
            self_m[frame_name(frames[0])] += 1
            ordered = [frame_name(f) for f in frames]
            names = set(ordered)
            if any(n.startswith("io.grpc.") for n in ordered) and not any(n.startswith("dev.kvrouter.") for n in ordered):
                transport[transport_kind(ordered)] += 1
            for n in names:
                incl_m[n] += 1
            matched = {}  # indentation -> whether the part at that depth matched
            for name, rx, unless in part_res:
                depth = len(name) - len(name.lstrip())
                hit = ((depth == 0 or matched.get(depth - 2, False)) and any(rx.search(n) for n in names)
                       and not (unless and any(unless.search(n) for n in names)))
                matched[depth] = hit
                if hit:
                    parts[name] += 1
            o = own_frame(frames)
            own[o] += 1
            own_by_thread[g][o] += 1
            entry[own_entry(frames)] += 1
        elif t == "jdk.NativeMethodSample":
            native_thread[thread_group(v["sampledThread"].get("javaName") or v["sampledThread"].get("osName"))] += 1
        elif t == "jdk.ObjectAllocationSample":
            w = v.get("weight") or 0
            alloc_bytes += w
            alloc_class[v["objectClass"]["name"]] += w
            frames = (v.get("stackTrace") or {}).get("frames") or []
            alloc_own[own_frame(frames)] += w
            if frames:
                alloc_top[frame_name(frames[0]) + " <- " + (frame_name(frames[1]) if len(frames) > 1 else "")] += w
        elif t == "jdk.ThreadCPULoad":
            th = v.get("eventThread") or {}
            g = thread_group(th.get("javaName") or th.get("osName"))
            cpu_load[g] += (v.get("user") or 0) + (v.get("system") or 0)
            cpu_load_n[g] += 1

    def pct(c, n):
        return 100.0 * c / n if n else 0.0

    res = {"recording": a.recording, "executionSamples": samples, "allocationBytesSampled": alloc_bytes,
           "requests": a.requests}

    def samples_section(title, key, rows):
        print(f"\n## {title}")
        res[key] = []
        for m, c in rows:
            print(f"{c:7d} {pct(c, samples):5.1f}%  {m}")
            res[key].append([m, c])

    def bytes_section(title, key, rows):
        print(f"\n## {title}")
        res[key] = []
        for m, c in rows:
            per = f"  {c / a.requests / 1024:9.1f} KiB/request" if a.requests else ""
            print(f"{c / 1e6:10.1f} MB {pct(c, alloc_bytes):5.1f}%{per}  {m}")
            res[key].append([m, c])

    print(f"execution samples: {samples}  (Java code only; a thread in native code or blocked is not sampled)")
    samples_section("execution samples by thread group", "byThread", by_thread.most_common())
    print("\n## ThreadCPULoad by thread group: sum of the events' user+system load (a share of the machine's CPUs; "
          "CPU seconds = sum x period x CPUs)")
    res["cpuLoadByThread"] = []
    for g, s in sorted(cpu_load.items(), key=lambda kv: -kv[1]):
        print(f"{s:8.2f}  {g}")
        res["cpuLoadByThread"].append([g, round(s, 3)])
    samples_section("router parts: samples with a matching frame anywhere on the stack (parts overlap)", "parts",
                    [(p[0], parts[p[0]]) for p in PARTS])
    samples_section("gRPC samples outside our handlers, by what they were doing", "transport", transport.most_common())
    samples_section("self samples (top frame)", "self", self_m.most_common(a.top))
    samples_section("inclusive samples (method anywhere on the stack)", "inclusive", incl_m.most_common(a.top * 2))
    samples_section("first dev.kvrouter frame from the top (where the router's own code spends, callees included)",
                    "ownFrame", own.most_common(a.top))
    samples_section("outermost dev.kvrouter frame (the router's entry point the sample ran under)", "entryFrame",
                    entry.most_common(a.top))
    bytes_section("allocation (sampled bytes, weighted) by class", "allocByClass", alloc_class.most_common(a.top // 2))
    bytes_section("allocation by first dev.kvrouter frame", "allocByOwnFrame", alloc_own.most_common(a.top))
    bytes_section("allocation by allocating frame <- caller", "allocByTop", alloc_top.most_common(a.top))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)

if __name__ == "__main__":
    sys.exit(main())
