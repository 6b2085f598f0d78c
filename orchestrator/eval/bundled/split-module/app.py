"""Sum the numbers in a file of "name: value" lines."""

import sys


def parse_line(line):
    name, _, value = line.partition(":")
    return name.strip(), float(value)


def total(lines):
    return sum(parse_line(line)[1] for line in lines if line.strip())


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        print(total(handle))
