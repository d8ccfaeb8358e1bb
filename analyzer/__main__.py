"""`python -m tilescope`: the same as the `tilescope` command."""

from tilescope.cli import main

raise SystemExit(main())
