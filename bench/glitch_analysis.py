"""The glitch soak's analysis (bench/glitch_soak.py): find a pop in a recording, read a
capture, what each cycle of the stream should hold, and what each cycle of a recording does
hold (in place, displaced by k cycles, silence where sound was due, or unknown)."""
import numpy as np

RATE = 48000
POP_FRAMES = 2400          # 50 ms, like the tests' pop

def find(rec, what, start=0, probe=64):
    """Frames where the first `probe` frames of `what` occur exactly in `rec` (both (n, 2) int16), from `start`."""
    n = len(rec) - probe + 1
    if n <= start:
        return []
    cand = np.nonzero((rec[start:n, 0] == what[0, 0]) & (rec[start:n, 1] == what[0, 1]))[0] + start
    for k in range(1, probe):
        if len(cand) == 0:
            break
        cand = cand[(rec[cand + k, 0] == what[k, 0]) & (rec[cand + k, 1] == what[k, 1])]
    return [int(c) for c in cand]


def load(path):
    """A recording as (frames, 2) int16: raw S16_LE, or a WAV's data chunk (to the end of the
    file if its size was left unset by a killed writer)."""
    data = open(path, "rb").read()
    if data[:4] == b"RIFF":
        i = 12
        while i + 8 <= len(data):
            size = int.from_bytes(data[i + 4:i + 8], "little")
            if data[i:i + 4] == b"data":
                end = len(data) if size in (0, 0xFFFFFFFF) or i + 8 + size > len(data) else i + 8 + size
                data = data[i + 8:end]
                break
            i += 8 + size + (size & 1)
    rec = np.frombuffer(data[:len(data) // 4 * 4], dtype="<i2")
    return rec.reshape(-1, 2)


def expected_of(rec, pop, bed, quantum, reach=8):
    """What `rec` should hold: the bed where it starts (found by a probe from its first 256
    frames, or from later ones if those were damaged) plus each pop where it was mixed in.
    A pop over the bed is found where the recording less the bed holds its first or its last
    64 frames, the bed also taken a few cycles displaced (a recording that slipped a cycle
    before the pop still shows it whole): it belongs where the bed in place would have it.
    Returns (b0, expected, pops); b0 None if the bed is not there."""
    b0 = None
    for at in (0, RATE, 3 * RATE, 6 * RATE):
        hits = find(rec, bed[at:], probe=256)
        if len(hits) == 1:
            b0 = hits[0] - at
            break
    if b0 is None:
        return None, None, []

    def bed_at(shift):
        out = np.zeros(rec.shape, dtype=np.int32)
        lo, hi = max(0, b0 + shift), min(len(rec), b0 + shift + len(bed))
        if hi > lo:
            out[lo:hi] = bed[lo - b0 - shift:hi - b0 - shift]
        return out

    pops = set()
    for k in sorted(range(-reach, reach + 1), key=abs):
        rest = np.clip(rec.astype(np.int32) - bed_at(k * quantum), -32768, 32767).astype(np.int16)
        found = set(find(rest, pop, probe=64)) | {p - (POP_FRAMES - 64) for p in find(rest, pop[-64:], probe=64)}
        for p in found:
            if b0 + k * quantum <= p < b0 + k * quantum + len(bed):
                pops.add(p - k * quantum)
            elif k == 0:
                pops.add(p)  # a pop from a stopped stream, after the bed: where it is
    pops = sorted(p for p in pops if p >= 0)
    # Overlapping finds of one pop (its start and its end both found, in place and displaced): one.
    merged = []
    for p in pops:
        if not merged or p - merged[-1] >= POP_FRAMES // 2:
            merged.append(p)
    expected = bed_at(0)
    for p in merged:
        q = min(POP_FRAMES, len(rec) - p)
        expected[p:p + q] += pop[:q]
    return b0, expected, merged


def blocks(rec, expected, b0, bed_frames, quantum, reach=8):
    """The recording cut into the graph's cycles (the stream starts on a cycle, so cycles
    fall on b0 + k·quantum) and each cycle said for what it holds: the expected cycle
    displaced by `k` cycles (0: in place), 'Z' (silence where sound was due) or '?'.
    Displacements are followed: a recorder or a stream that slipped a cycle for good is one
    event, and what comes after is judged against its new place; after the bed, silence
    ends a stream and the next one (a pop from a stopped stream) is judged where it is.
    Returns the events: (the stream's cycle where it begins, counted from the bed's start,
    whatever the recorder had slipped before; [what each cycle held until steady again])."""
    start = b0 % quantum
    n = (len(rec) - start) // quantum
    r = rec[start:start + n * quantum].reshape(n, quantum, 2)
    e = np.zeros((n + 2 * reach, quantum, 2), dtype=np.int32)
    e[reach:reach + n] = expected[start:start + n * quantum].reshape(n, quantum, 2)
    loud = e.any(axis=(1, 2))
    heard = r.any(axis=(1, 2))
    first_cycle = (b0 - start) // quantum
    bed_end = first_cycle + (bed_frames + quantum - 1) // quantum
    events, cur, off = [], None, 0
    for i in range(n):
        if not heard[i] and (i >= bed_end + abs(off) or i < first_cycle - reach) and not loud[reach + i]:
            off = 0  # between streams
        if not loud[reach + i + off] and not heard[i]:
            kind = off  # silence where silence was due
        elif np.array_equal(r[i], e[reach + i + off]):
            kind = off
        elif not heard[i]:
            kind = "Z"
        else:
            kind = "?"
            for k in sorted(range(-reach, reach + 1), key=abs):
                if loud[reach + i + k] and np.array_equal(r[i], e[reach + i + k]):
                    kind = k
                    break
        if kind != off:
            if cur is None:
                cur = [i - first_cycle + off, []]  # the stream's cycle this recorder was at
                events.append(cur)
            cur[1].append(kind)
            if isinstance(kind, int):
                off = kind  # a slip: judged from its new place on
        else:
            cur = None
    return events


def clock_offsets(pops, asked):
    """The recording's clock against the monotonic one: frame/RATE − request time over the
    pairs of pops and requests that agree (every pair's difference, the most common to 20 ms:
    the latency), so that a pop missing or extra does not shift the pairing of the others."""
    diffs = [p / RATE - t / 1e9 for p in pops for _, t in asked]
    bins = {}
    for d in diffs:
        bins.setdefault(round(d / 0.02), []).append(d)
    if not bins:
        return []
    best = max(bins, key=lambda k: len(bins[k]))
    near = bins[best] + bins.get(best - 1, []) + bins.get(best + 1, [])
    return near if len(near) >= max(3, len(pops) // 2) else []


def shape_of(kinds):
    """A name for what an event's cycles held: 'early 1, Z' is one cycle early then silence."""
    out = []
    for k in kinds:
        out.append("Z" if k == "Z" else "?" if k == "?" else ("in place" if k == 0 else
                   ("early %d" % k if k > 0 else "late %d" % -k)))
    return ", ".join(out)
