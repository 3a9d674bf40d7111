"""Block-production statistics of a running Ergon chain, read over JSON-RPC.

Reads the BABE pre-runtime digest of each header (slot number and authority index), so block time and
empty-slot rate are measured in the protocol's own units rather than by wall-clock sampling.
"""
import json
import time
import urllib.request

SLOT_MS = 2000  # runtime::units::SLOT_DURATION


def rpc(port, method, params=None):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        reply = json.load(resp)
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply["result"]


def wait_rpc(port, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            return rpc(port, "system_health")
        except Exception:
            time.sleep(0.5)
    raise TimeoutError(f"no RPC on port {port}")


def babe_slot_and_author(header):
    """(slot, authority index) from the BABE PreRuntime digest of a header."""
    for log in header["digest"]["logs"]:
        raw = bytes.fromhex(log[2:])
        # DigestItem::PreRuntime = 6, engine id b"BABE", then a compact-length-prefixed PreDigest.
        if raw[0] != 6 or raw[1:5] != b"BABE":
            continue
        mode = raw[5] & 3
        offset = 6 if mode == 0 else 7 if mode == 1 else 9 if mode == 2 else None
        digest = raw[offset:]
        authority = int.from_bytes(digest[1:5], "little")
        slot = int.from_bytes(digest[5:13], "little")
        return slot, authority
    raise ValueError("header has no BABE pre-digest")


def finalized_number(port):
    head = rpc(port, "chain_getFinalizedHead")
    return int(rpc(port, "chain_getHeader", [head])["number"], 16)


def best_number(port):
    return int(rpc(port, "chain_getHeader")["number"], 16)


def headers(port, first, last):
    out = []
    for n in range(first, last + 1):
        h = rpc(port, "chain_getBlockHash", [n])
        out.append(rpc(port, "chain_getHeader", [h]))
    return out


def block_stats(port, first, last):
    """Mean block time and empty-slot rate over blocks first..last (inclusive) of the best chain."""
    hs = headers(port, first, last)
    slots = [babe_slot_and_author(h)[0] for h in hs]
    authors = [babe_slot_and_author(h)[1] for h in hs]
    blocks = len(hs) - 1
    slot_span = slots[-1] - slots[0]
    return {
        "blocks": blocks,
        "slots": slot_span,
        "mean_block_time_s": slot_span * SLOT_MS / 1000 / blocks,
        "empty_slot_rate": 1 - blocks / slot_span,
        "authors": authors[1:],
    }
