"""`python -m proxy.doctor`: the same as `datamap-proxy doctor`."""
import sys

from proxy.doctor import main

sys.exit(main())
