"""Read the CSV files `qmm bench` writes: '# key: value' metadata lines, then a CSV table.
Committed results are stored gzip-compressed (bench/results/README.md): a path names either
form, and X.csv is read from X.csv.gz where only that exists."""
import csv
import gzip
import os


def open_csv(path):
    """The text of a CSV at path, or at path + '.gz' where only the compressed copy exists."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def read_csv_with_meta(path):
    """-> (metadata dict, list of row dicts)."""
    meta, lines = {}, []
    with open_csv(path) as f:
        for line in f:
            if line.startswith("#"):
                key, sep, value = line[1:].partition(":")
                if sep:
                    meta[key.strip()] = value.strip()
            elif line.strip():
                lines.append(line)
    return meta, list(csv.DictReader(lines))
