import sys

from proxy.cli import main

if __name__ == "__main__":      # a spawned worker process re-imports this as __mp_main__
    sys.exit(main())
