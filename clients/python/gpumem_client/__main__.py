"""``python -m gpumem_client record -o run.jsonl -- python train.py``: see ``record``."""

import sys

from . import record


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("record",):
        print("usage: python -m gpumem_client record -o FILE [options] -- COMMAND ...", file=sys.stderr)
        return 2
    return record.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
