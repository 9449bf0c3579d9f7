"""A worker process for test_tcp.py: receives versions into its own zeroed arrays and prints one JSON line
per version with the checksum it recomputes from its arrays."""

import json
import sys

import numpy as np

import sparsesync as ss
from conftest import MIXED, WORDS

port, key_file = int(sys.argv[1]), sys.argv[2]
layout = ss.Layout(MIXED)
weights = [np.zeros(shape, WORDS[dt]) for _, dt, shape in MIXED]
with ss.Subscriber(layout, weights, key_file, port=port, receive_timeout=60) as sub:
    for report in sub:
        report["recomputed"] = ss.checksum(layout, weights)
        print(json.dumps(report), flush=True)
