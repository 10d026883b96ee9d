"""Read the CSV files `qmm bench` writes: '# key: value' metadata lines, then a CSV table."""
import csv


def read_csv_with_meta(path):
    """-> (metadata dict, list of row dicts)."""
    meta, lines = {}, []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#"):
                key, sep, value = line[1:].partition(":")
                if sep:
                    meta[key.strip()] = value.strip()
            elif line.strip():
                lines.append(line)
    return meta, list(csv.DictReader(lines))
